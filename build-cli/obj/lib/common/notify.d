build-cli/obj/lib/common/notify.o: lib/common/notify.c \
 lib/common/notify.h
lib/common/notify.h:

build-cli/obj/lib/common/duration.o: lib/common/duration.c \
 lib/common/duration.h lib/common/err.h
lib/common/duration.h:
lib/common/err.h:

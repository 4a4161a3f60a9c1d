build-yaml-san/obj/lib/common/log.o: lib/common/log.c lib/common/log.h \
 lib/common/err.h
lib/common/log.h:
lib/common/err.h:

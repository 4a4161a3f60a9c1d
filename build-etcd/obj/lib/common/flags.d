build-etcd/obj/lib/common/flags.o: lib/common/flags.c lib/common/flags.h \
 lib/common/err.h lib/common/duration.h
lib/common/flags.h:
lib/common/err.h:
lib/common/duration.h:

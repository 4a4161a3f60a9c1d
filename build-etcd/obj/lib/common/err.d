build-etcd/obj/lib/common/err.o: lib/common/err.c lib/common/err.h
lib/common/err.h:

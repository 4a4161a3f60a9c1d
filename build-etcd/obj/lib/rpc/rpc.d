build-etcd/obj/lib/rpc/rpc.o: lib/rpc/rpc.c lib/rpc/rpc_int.h \
 lib/rpc/rpc.h lib/common/err.h lib/common/clock.h lib/common/log.h
lib/rpc/rpc_int.h:
lib/rpc/rpc.h:
lib/common/err.h:
lib/common/clock.h:
lib/common/log.h:

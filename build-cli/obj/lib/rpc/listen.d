build-cli/obj/lib/rpc/listen.o: lib/rpc/listen.c lib/common/clock.h \
 lib/common/log.h lib/rpc/rpc_int.h lib/rpc/rpc.h lib/common/err.h
lib/common/clock.h:
lib/common/log.h:
lib/rpc/rpc_int.h:
lib/rpc/rpc.h:
lib/common/err.h:

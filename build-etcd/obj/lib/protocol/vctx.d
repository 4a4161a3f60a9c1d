build-etcd/obj/lib/protocol/vctx.o: lib/protocol/vctx.c \
 lib/protocol/vctx.h lib/common/err.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h
lib/protocol/vctx.h:
lib/common/err.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:

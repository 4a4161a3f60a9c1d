build-etcd/obj/lib/protocol/labelset_ops.o: lib/protocol/labelset_ops.c \
 lib/protocol/labels.h lib/common/err.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/labels.h:
lib/common/err.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:

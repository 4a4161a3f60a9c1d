build-etcd/obj/lib/protocol/labels.o: lib/protocol/labels.c \
 lib/protocol/labels.h lib/common/err.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h lib/protocol/validate.h \
 lib/protocol/vctx.h
lib/protocol/labels.h:
lib/common/err.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
lib/protocol/validate.h:
lib/protocol/vctx.h:

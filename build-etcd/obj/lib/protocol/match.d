build-etcd/obj/lib/protocol/match.o: lib/protocol/match.c \
 lib/protocol/labels.h lib/common/err.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/labels.h:
lib/common/err.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:

build-etcd/obj/lib/protocol/route.o: lib/protocol/route.c \
 lib/protocol/url.h lib/common/err.h lib/protocol/validate.h \
 build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/url.h:
lib/common/err.h:
lib/protocol/validate.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:

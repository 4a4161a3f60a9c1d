build-etcd/obj/lib/protocol/url.o: lib/protocol/url.c lib/protocol/url.h \
 lib/common/err.h lib/protocol/vctx.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h
lib/protocol/url.h:
lib/common/err.h:
lib/protocol/vctx.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:

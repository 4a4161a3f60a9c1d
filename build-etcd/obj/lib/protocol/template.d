build-etcd/obj/lib/protocol/template.o: lib/protocol/template.c \
 lib/protocol/validate.h lib/common/err.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/validate.h:
lib/common/err.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:

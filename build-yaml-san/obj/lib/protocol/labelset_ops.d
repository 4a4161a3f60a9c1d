build-yaml-san/obj/lib/protocol/labelset_ops.o: \
 lib/protocol/labelset_ops.c lib/protocol/labels.h lib/common/err.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/labels.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:

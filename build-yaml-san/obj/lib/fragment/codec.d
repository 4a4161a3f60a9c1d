build-yaml-san/obj/lib/fragment/codec.o: lib/fragment/codec.c \
 lib/fragment/codec.h lib/common/err.h lib/fragment/fragment.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h
lib/fragment/codec.h:
lib/common/err.h:
lib/fragment/fragment.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:

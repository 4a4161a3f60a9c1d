build-cli/obj/lib/fragment/codec.o: lib/fragment/codec.c \
 lib/fragment/codec.h lib/common/err.h lib/fragment/fragment.h \
 build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h
lib/fragment/codec.h:
lib/common/err.h:
lib/fragment/fragment.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:

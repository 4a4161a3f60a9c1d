build-cli/obj/lib/fragment/fragment.o: lib/fragment/fragment.c \
 lib/fragment/fragment.h lib/common/err.h build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h
lib/fragment/fragment.h:
lib/common/err.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:

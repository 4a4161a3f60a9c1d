build-cli/obj/lib/fragment/coverset.o: lib/fragment/coverset.c \
 lib/fragment/coverset.h lib/common/err.h lib/fragment/fragment.h \
 build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h lib/common/log.h
lib/fragment/coverset.h:
lib/common/err.h:
lib/fragment/fragment.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
lib/common/log.h:

build-yaml-san/obj/lib/fragment/fragment.o: lib/fragment/fragment.c \
 lib/fragment/fragment.h lib/common/err.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h
lib/fragment/fragment.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:

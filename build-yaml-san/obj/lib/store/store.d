build-yaml-san/obj/lib/store/store.o: lib/store/store.c lib/store/store.h \
 lib/common/err.h lib/fragment/fragment.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h lib/common/log.h
lib/store/store.h:
lib/common/err.h:
lib/fragment/fragment.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
lib/common/log.h:

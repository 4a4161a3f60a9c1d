build-yaml-san/obj/lib/fragment/spool.o: lib/fragment/spool.c \
 lib/fragment/spool.h lib/common/err.h lib/fragment/fragment.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h lib/common/clock.h \
 lib/common/log.h
lib/fragment/spool.h:
lib/common/err.h:
lib/fragment/fragment.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
lib/common/clock.h:
lib/common/log.h:

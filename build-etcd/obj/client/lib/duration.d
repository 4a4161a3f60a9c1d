build-etcd/obj/client/lib/duration.o: client/lib/duration.c \
 client/include/gazette/duration.h lib/common/duration.h lib/common/err.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h
client/include/gazette/duration.h:
lib/common/duration.h:
lib/common/err.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:

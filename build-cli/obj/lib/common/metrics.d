build-cli/obj/lib/common/metrics.o: lib/common/metrics.c \
 lib/common/metrics.h lib/common/err.h lib/common/log.h
lib/common/metrics.h:
lib/common/err.h:
lib/common/log.h:

build-yaml/obj/lib/common/http.o: lib/common/http.c lib/common/http.h \
 lib/common/err.h
lib/common/http.h:
lib/common/err.h:

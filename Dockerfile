# One image with gazette (the broker), gazctl, gazload (a load generator
# that verifies what it was acknowledged) and gazette-operator, built
# with the project's Makefile on Debian 12 and run on Debian 12 slim with
# only the shared libraries they link (plus curl, for probes and the e2e
# bucket set-up).
#   DOCKER_BUILDKIT=0 docker build -t gazette-c:dev .
# Written for Docker's legacy builder too (no BuildKit-only syntax, no
# `# syntax=` line, which would make BuildKit pull its frontend): CI
# machines have Debian's Docker engine but no registry and no buildx.
# scripts/images.sh starts the engine, makes both debian:12 bases by
# debootstrap and builds this image; e2e/run-kind.sh builds it as
# gazette-c:e2e. The packages are the build and runtime halves of
# scripts/deps.sh's list.

FROM debian:12 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential pkg-config libgrpc-dev libprotobuf-c-dev protobuf-c-compiler \
      protobuf-compiler libprotobuf-dev libssl-dev libzstd-dev libcurl4-openssl-dev \
      libjansson-dev libyaml-dev libexpat1-dev zlib1g-dev libsnappy-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY proto proto
COPY lib lib
COPY broker broker
COPY client client
COPY message message
COPY operator operator
# Only the four programs: the unit tests (cmocka) and test tools stay out.
RUN make -j"$(nproc)" build/bin/gazette build/bin/gazctl build/bin/gazload build/bin/gazette-operator \
    && strip build/bin/gazette build/bin/gazctl build/bin/gazload build/bin/gazette-operator

FROM debian:12-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl libgrpc29 libprotobuf-c1 libssl3 libzstd1 zlib1g libcurl4 \
      libjansson4 libyaml-0-2 libexpat1 libsnappy1v5 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 gazette \
    && useradd --uid 65532 --gid 65532 --home-dir /home/gazette --create-home gazette \
    && mkdir -p /var/lib/gazette/spool && chown gazette:gazette /var/lib/gazette/spool
COPY --from=build /src/build/bin/gazette /src/build/bin/gazctl /src/build/bin/gazload \
     /src/build/bin/gazette-operator /usr/local/bin/
USER 65532:65532
WORKDIR /home/gazette
ENV TMPDIR=/var/lib/gazette/spool
EXPOSE 8080
ENTRYPOINT []
CMD ["gazette", "serve"]

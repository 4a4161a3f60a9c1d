# kind.local/tinynet:v1 - the node's CNI DaemonSet (see tinynet and
# manifests/default-cni.yaml). Built by scripts/images.sh (context:
# e2e/node) on kind.local/netbase:v1.
FROM kind.local/netbase:v1
COPY tinynet /usr/local/bin/tinynet
RUN chmod 0755 /usr/local/bin/tinynet
ENTRYPOINT ["/usr/local/bin/tinynet"]

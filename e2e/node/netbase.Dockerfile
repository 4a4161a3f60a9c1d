# kind.local/netbase:v1 - Debian 12 slim with the networking tools the
# kind node's host-network containers need (kube-proxy, tinynet), and
# iptables-wrapper in front of Debian's iptables so that they use the
# node's backend. Built by scripts/images.sh (context: e2e/node).
FROM debian:12-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      iptables nftables conntrack iproute2 curl jq ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/log/*.log
COPY iptables-wrapper /usr/local/sbin/iptables-wrapper
RUN chmod 0755 /usr/local/sbin/iptables-wrapper \
    && for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do \
      ln -s iptables-wrapper "/usr/local/sbin/$n"; done

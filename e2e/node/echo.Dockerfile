# kind.local/echo:v1 - a pod that answers HTTP on 8080 with its own name
# ($HOSTNAME), for checking pod-IP and Service traffic across kind nodes:
#   kubectl exec POD -- timeout 5 busybox wget -O - http://<pod IP>:8080/
# (busybox 1.35's `wget -q -T` crashes; use timeout). Built by
# scripts/images.sh (context: e2e/node).
FROM debian:12-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends busybox \
    && rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/log/*.log \
    && mkdir /www
EXPOSE 8080
CMD ["sh", "-c", "echo \"$HOSTNAME\" >/www/index.html && exec busybox httpd -f -p 8080 -h /www"]

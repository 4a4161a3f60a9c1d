/*
 * test_kubeconfig.c - kubeconfig parsing (contexts, embedded and file
 * credentials, tokens, refusals), base64, and in-cluster configuration
 * from the environment and a service-account directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "operator/kube.h"

/* "-----BEGIN CA-----\n" and friends, base64-encoded. */
#define CA_B64 "LS0tLS1CRUdJTiBDQS0tLS0tCg=="
#define CERT_B64 "Y2VydC1wZW0="
#define KEY_B64 "a2V5LXBlbQ=="

static const char kubeconfig[] =
	"apiVersion: v1\n"
	"kind: Config\n"
	"current-context: test\n"
	"clusters:\n"
	"- name: test\n"
	"  cluster:\n"
	"    server: https://127.0.0.1:6443/\n"
	"    certificate-authority-data: " CA_B64 "\n"
	"- name: other\n"
	"  cluster:\n"
	"    server: https://10.0.0.1\n"
	"    certificate-authority: pki/ca.crt\n"
	"    insecure-skip-tls-verify: true\n"
	"users:\n"
	"- name: admin\n"
	"  user:\n"
	"    client-certificate-data: " CERT_B64 "\n"
	"    client-key-data: " KEY_B64 "\n"
	"- name: bot\n"
	"  user:\n"
	"    token: s3cr3t\n"
	"    tokenFile: /var/run/token\n"
	"    client-certificate: certs/bot.crt\n"
	"    client-key: /abs/bot.key\n"
	"- name: plugin\n"
	"  user:\n"
	"    exec: {command: get-token}\n"
	"contexts:\n"
	"- name: test\n"
	"  context: {cluster: test, user: admin, namespace: team-a}\n"
	"- name: other\n"
	"  context: {cluster: other, user: bot}\n"
	"- name: plugin\n"
	"  context: {cluster: test, user: plugin}\n"
	"- name: nocluster\n"
	"  context: {cluster: missing, user: admin}\n";

static int parse(const char *yaml, const char *dir, const char *ctx, struct gaz_kube_config *c,
		 struct gaz_status *st)
{
	memset(c, 0, sizeof(*c));
	return gaz_kube_config_parse(yaml, strlen(yaml), dir, ctx, c, st);
}

static void test_current_context_embedded(void **state)
{
	struct gaz_kube_config c;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(parse(kubeconfig, "/home/u/.kube", NULL, &c, &st), 0);
	assert_string_equal(c.server, "https://127.0.0.1:6443"); /* trailing '/' dropped */
	assert_string_equal(c.ca_data, "-----BEGIN CA-----\n");
	assert_int_equal(c.ca_len, 19);
	assert_string_equal(c.cert_data, "cert-pem");
	assert_string_equal(c.key_data, "key-pem");
	assert_null(c.ca_file);
	assert_null(c.token);
	assert_string_equal(c.namespace, "team-a");
	assert_false(c.insecure);
	gaz_kube_config_release(&c);
}

static void test_named_context_files_and_tokens(void **state)
{
	struct gaz_kube_config c;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(parse(kubeconfig, "/home/u/.kube", "other", &c, &st), 0);
	assert_string_equal(c.server, "https://10.0.0.1");
	assert_string_equal(c.ca_file, "/home/u/.kube/pki/ca.crt"); /* relative to the file */
	assert_string_equal(c.cert_file, "/home/u/.kube/certs/bot.crt");
	assert_string_equal(c.key_file, "/abs/bot.key");
	assert_string_equal(c.token, "s3cr3t");
	assert_string_equal(c.token_file, "/var/run/token");
	assert_true(c.insecure);
	assert_null(c.namespace);
	assert_null(c.ca_data);
	gaz_kube_config_release(&c);
}

static void test_errors(void **state)
{
	struct gaz_kube_config c;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(parse(kubeconfig, NULL, "plugin", &c, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "exec"));
	gaz_status_clear(&st);
	assert_int_equal(parse(kubeconfig, NULL, "nope", &c, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "no context \"nope\""));
	gaz_status_clear(&st);
	assert_int_equal(parse(kubeconfig, NULL, "nocluster", &c, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "no cluster \"missing\""));
	gaz_status_clear(&st);
	assert_int_equal(parse("clusters: [\n", NULL, NULL, &c, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "line"));
	gaz_status_clear(&st);
	assert_int_equal(parse("kind: Config\n", NULL, NULL, &c, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "current-context"));
	gaz_status_clear(&st);
	assert_int_equal(parse("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
			       "clusters:\n- name: c\n  cluster: {certificate-authority-data: \"!!\", server: https://a}\n",
			       NULL, NULL, &c, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "certificate-authority-data"));
	gaz_status_clear(&st);
	assert_int_equal(parse("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
			       "clusters:\n- name: c\n  cluster: {insecure-skip-tls-verify: true}\n",
			       NULL, NULL, &c, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "no server"));
}

static void test_base64(void **state)
{
	static const struct {
		const char *in, *out;
	} ok[] = {{"", ""}, {"YQ==", "a"}, {"YWI=", "ab"}, {"YWJj", "abc"},
		  {"YWJj\nZGVm\n", "abcdef"}, {"L+8=", "/\xef"}};
	static const char *const bad[] = {"YQ", "Y===", "YQ==YQ==", "Y*Jj", "YWJjZ"};
	struct gaz_status st = {0};
	char *out;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(gaz_base64_decode(ok[i].in, strlen(ok[i].in), &out, &n, &st), 0);
		assert_int_equal(n, strlen(ok[i].out));
		assert_memory_equal(out, ok[i].out, n);
		free(out);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(gaz_base64_decode(bad[i], strlen(bad[i]), &out, &n, &st), GAZ_EINVAL);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void test_in_cluster(void **state)
{
	char dir[] = "/tmp/gaz-sa-XXXXXX";
	struct gaz_kube_config c = {0};
	struct gaz_status st = {0};

	(void)state;
	assert_non_null(mkdtemp(dir));
	unsetenv("KUBERNETES_SERVICE_HOST");
	assert_int_equal(gaz_kube_config_in_cluster(dir, &c, &st), GAZ_ENOTFOUND);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	gaz_status_clear(&st);
	assert_int_equal(gaz_kube_config_in_cluster(dir, &c, &st), GAZ_ENOTFOUND); /* no token */
	write_file(dir, "token", "tok\n");
	write_file(dir, "namespace", "gazette\n");
	assert_int_equal(gaz_kube_config_in_cluster(dir, &c, &st), 0);
	assert_string_equal(c.server, "https://10.96.0.1:443");
	assert_non_null(strstr(c.token_file, "/token"));
	assert_null(c.ca_file); /* no ca.crt in the directory */
	assert_string_equal(c.namespace, "gazette");
	gaz_kube_config_release(&c);
	write_file(dir, "ca.crt", "pem");
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	assert_int_equal(gaz_kube_config_in_cluster(dir, &c, &st), 0);
	assert_string_equal(c.server, "https://[fd00::1]:443");
	assert_non_null(strstr(c.ca_file, "/ca.crt"));
	gaz_kube_config_release(&c);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_current_context_embedded),
		cmocka_unit_test(test_named_context_files_and_tokens),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_in_cluster),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_router_endpoints.c - --endpoints FILE (src/router/engine/
 * endpoints_file.h): llm-d's file-discovery format in YAML and JSON, each
 * refusal with its file, line and field, the mapping onto the workers,
 * and the table's reload (replaced by rename, a bad reload keeping the
 * previous set, nothing done when nothing changed, the subset lookup).
 * The sample samples/endpoints.yaml is also read by python3-yaml, an
 * independent YAML reader, and must give the same endpoints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "endpoints_file.h"

static const char yaml4[] =
    "# four decode workers\n"
    "endpoints:\n"
    "  - name: w0\n"
    "    namespace: inference\n"
    "    address: \"10.0.0.1\"\n"
    "    port: \"8000\"\n"
    "    labels:\n"
    "      rank: \"0\"\n"
    "      job: tp-42\n"
    "  - name: w1\n"
    "    address: '10.0.0.2'\n"
    "    port: \"8000\"\n"
    "  - {name: w2, address: 10.0.0.3, port: \"8001\", metricsHost: \"10.0.0.3:9090\"}\n"
    "  - name: w3\n"
    "    address: 10.0.0.4\n"
    "    port: \"+8002\"\n"
    "    labels:\n";

static const char json4[] =
    "{\"endpoints\": [\n"
    "  {\"name\": \"w0\", \"namespace\": \"inference\", \"address\": \"10.0.0.1\",\n"
    "   \"port\": \"8000\", \"labels\": {\"rank\": \"0\", \"job\": \"tp-\\u0034\\u0032\"}},\n"
    "  {\"name\": \"w1\", \"address\": \"10.0.0.2\", \"port\": \"8000\"},\n"
    "  {\"name\": \"w2\", \"address\": \"10.0.0.3\", \"port\": \"8001\", \"metricsHost\": \"x\"},\n"
    "  {\"name\": \"w3\", \"address\": \"10.0.0.4\", \"port\": \"+8002\", \"labels\": null}\n"
    "]}\n";

static char *const workers[] = {"w0", "w1", "w2", "w3"};

static int parse(const char *text, endpoint_set *s, char *err, size_t n)
{
    return endpoints_parse(text, strlen(text), "endpoints.yaml", s, err, n);
}

static void assert_same_set(const endpoint_set *a, const endpoint_set *b)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        const endpoint *x = &a->v[i], *y = &b->v[i];
        assert_string_equal(x->name, y->name);
        assert_string_equal(x->ns, y->ns);
        assert_string_equal(x->address, y->address);
        assert_int_equal(x->port, y->port);
        assert_string_equal(x->hostport, y->hostport);
        assert_int_equal(x->nlabels, y->nlabels);
        for (int j = 0; j < x->nlabels; j++) {
            assert_string_equal(x->labels[j].key, y->labels[j].key);
            assert_string_equal(x->labels[j].value, y->labels[j].value);
        }
    }
}

static void test_yaml_json_same(void **state)
{
    (void)state;
    endpoint_set y, j;
    char err[512];
    assert_int_equal(parse(yaml4, &y, err, sizeof err), 0);
    assert_int_equal(endpoints_parse(json4, strlen(json4), "e.json", &j, err, sizeof err), 0);
    assert_same_set(&y, &j);
    assert_int_equal(y.n, 4);
    assert_string_equal(y.v[0].ns, "inference");
    assert_string_equal(y.v[1].ns, "default");
    assert_string_equal(y.v[0].labels[1].value, "tp-42");
    assert_string_equal(y.v[2].hostport, "10.0.0.3:8001");
    assert_string_equal(y.v[3].hostport, "10.0.0.4:8002");   /* "+8002": Atoi's reading */
    assert_int_equal(y.v[2].line, 13);
    assert_string_equal(y.source, "endpoints.yaml");
    endpoints_free(&y);
    endpoints_free(&j);
    /* YAML's flow style starts with '{' too but is not JSON: llm-d takes it */
    const char *flow = "{endpoints: [{name: a, address: 10.0.0.9, port: '1'}]}";
    assert_int_equal(parse(flow, &y, err, sizeof err), 0);
    assert_string_equal(y.v[0].hostport, "10.0.0.9:1");
    endpoints_free(&y);
}

/* text must be refused with a message holding want. */
static void refused(const char *text, size_t len, const char *want)
{
    endpoint_set s;
    char err[512] = "";
    int rc = endpoints_parse(text, len, "endpoints.yaml", &s, err, sizeof err);
    if (rc != -1 || !strstr(err, want))
        fail_msg("want \"%s\", got rc %d \"%s\"", want, rc, err);
    assert_null(s.v);
    assert_int_equal(s.n, 0);
}

#define REFUSED(text, want) refused(text, strlen(text), want)

/* A file of a good first entry and a second one of these fields, and
 * what its refusal must say. */
#define FIRST "endpoints:\n  - name: a\n    address: \"10.0.0.1\"\n    port: \"1\"\n  - "
static const char *const second_entry[][2] = {
    {"name: b\n    address: \"10.0.0.2\"\n    port: \"80a\"\n",
     "endpoints.yaml:7: endpoints[1].port: \"80a\" is not a port (1..65535)"},
    {"name: b\n    address: \"10.0.0.2\"\n    port: \"65536\"\n",
     "is not a port"},
    {"name: b\n    address: \"10.0.0.2\"\n    port: \"0\"\n",
     "is not a port"},
    {"name: b\n    address: \"10.0.0.2\"\n    port: \"\"\n",
     "[1].port: is empty"},
    {"name: b\n    address: \"10.0.0.2\"\n    port: 8000\n",
     ":7: endpoints[1].port: 8000 is not a string"},
    {"name: b\n    address: \"fd00::1\"\n    port: \"1\"\n",
     ":6: endpoints[1].address: \"fd00::1\" is IPv6"},
    {"name: b\n    address: \"10.0.0.256\"\n    port: \"1\"\n",
     "not a dotted IPv4"},
    {"name: b\n    address: \"010.0.0.2\"\n    port: \"1\"\n",
     "not a dotted IPv4"},
    {"name: b\n    address: vllm-1.svc\n    port: \"1\"\n",
     "not a dotted IPv4"},
    {"name: b\n    port: \"1\"\n",
     ":5: endpoints[1]: no address (it is required)"},
    {"address: \"10.0.0.2\"\n    port: \"1\"\n",
     "endpoints[1]: no name"},
    {"name: b\n    address: \"10.0.0.2\"\n",
     "endpoints[1]: no port"},
    {"name: ~\n    address: \"10.0.0.2\"\n    port: \"1\"\n",
     "no name"},
    {"name: yes\n    address: \"10.0.0.2\"\n    port: \"1\"\n",
     "name: yes is not a string"},
    {"name: [b]\n    address: \"10.0.0.2\"\n    port: \"1\"\n",
     "is a list, not a string"},
    {"name: a\n    address: \"10.0.0.2\"\n    port: \"1\"\n",
     ":5: endpoints[1]: default/a is endpoints[0] again"},
    {"name: b\n    address: \"10.0.0.1\"\n    port: \"+1\"\n",
     "endpoints[1]: address 10.0.0.1:1 is endpoints[0]'s too"},
    {"name: b\n    name: c\n    address: \"10.0.0.2\"\n    port: \"1\"\n",
     ":6: endpoints[1].name: given twice"},
    {"name: b\n    address: \"10.0.0.2\"\n    port: \"2\"\n    labels: [x]\n",
     "labels: is a list, not a mapping"},
    {"name: b\n    address: \"10.0.0.2\"\n    port: \"2\"\n    labels: {rank: 0}\n",
     "labels.rank: is a number or a boolean, not a string (quote it)"},
    {"- x\n",
     "endpoints[1]: is a list, not a mapping"},
};

static void test_refusals(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof second_entry / sizeof *second_entry; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s%s", FIRST, second_entry[i][0]);
        REFUSED(text, second_entry[i][1]);
    }
    REFUSED("endpoints: []\n", ":1: no endpoints (the list is empty)");
    REFUSED("endpoints:\n", "no endpoints (`endpoints` is missing or null)");
    REFUSED("nodes: [1]\n", "no endpoints (`endpoints` is missing or null)");
    REFUSED("", "no endpoints (the file is empty)");
    REFUSED("# nothing\n", "no endpoints (the file is empty)");
    REFUSED("endpoints: {name: a}\n", ":1: endpoints: is a mapping, not a list");
    REFUSED("endpoints: 3\n", "endpoints: is a number or a boolean, not a list");
    REFUSED("- endpoints\n", ":1: the top level is a list, not a mapping");
    REFUSED("endpoints:\n  - name: a\n    address: [\n", "endpoints.yaml:4: not YAML:");
    REFUSED("endpoints:\n  - name: a\n   address: x\n", "endpoints.yaml:3: not YAML:");
    REFUSED("{\"endpoints\": [{\"name\": \"a\",\n \"port\": 1}", "endpoints.yaml:2: not JSON:");
    REFUSED("{\"endpoints\": [{\"name\": \"a\", \"address\": \"10.0.0.1\",\n \"port\": 8000}]}",
            "endpoints.yaml:2: endpoints[0].port: 8000 is not a string");
    REFUSED("{\"endpoints\": [{\"name\": \"a\", \"name\": \"b\"}]}", ":1: endpoints[0].name: given twice");
    REFUSED("{\"endpoints\": [{\"name\": \"a\", \"address\": \"10.0.0.1\", \"port\": \"1\",\n"
            " \"labels\": {\"k\": 1}}]}", ":2: endpoints[0].labels.k: is a number");
    /* binary garbage, a NUL inside */
    static const char bin[] = {'\x7f', 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, '\xff', '\xfe', 3};
    refused(bin, sizeof bin, "endpoints.yaml:1: not YAML:");
    /* an alias bomb is bounded */
    char bomb[2048] = "a: &a [x, x, x, x, x, x, x, x]\n";
    for (int i = 0; i < 9; i++) {
        char line[160];
        snprintf(line, sizeof line, "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n",
                 'b' + i, 'b' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i,
                 'a' + i, 'a' + i);
        strcat(bomb, line);
    }
    REFUSED(bomb, "more than 1M nodes");
    REFUSED("a: &a [*a]\n", "nested deeper than 32");
}

static void test_too_many(void **state)
{
    (void)state;
    size_t cap = (size_t)(EP_MAX + 1) * 80 + 32, n = 0;
    char *t = malloc(cap);
    n += (size_t)snprintf(t + n, cap - n, "endpoints:\n");
    for (int i = 0; i <= EP_MAX; i++)
        n += (size_t)snprintf(t + n, cap - n, "- {name: w%d, address: 10.0.%d.%d, port: \"80\"}\n",
                              i, i / 256, i % 256);
    refused(t, n, "4097 endpoints, more than 4096");
    free(t);
}

static char dir[64];

static void path_of(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", dir, name);
}

/* Write text to name atomically: a temporary file, then rename. */
static void put(const char *name, const char *text)
{
    char tmp[128], dst[128];
    path_of(".tmp", tmp, sizeof tmp);
    path_of(name, dst, sizeof dst);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, dst), 0);
}

static void test_file_errors(void **state)
{
    (void)state;
    endpoint_set s;
    char err[512], p[128];
    path_of("none.yaml", p, sizeof p);
    assert_int_equal(endpoints_load(p, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "none.yaml: cannot read: No such file"));
    assert_int_equal(endpoints_load(dir, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
    path_of("big.yaml", p, sizeof p);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)EP_FILE_MAX + 1), 0);
    fclose(f);
    assert_int_equal(endpoints_load(p, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "big.yaml: larger than 4 MiB"));
    unlink(p);
    put("e.yaml", yaml4);
    path_of("e.yaml", p, sizeof p);
    assert_int_equal(endpoints_load(p, &s, err, sizeof err), 0);
    assert_string_equal(s.source, p);
    endpoints_free(&s);
}

static void test_map(void **state)
{
    (void)state;
    endpoint_set s;
    char err[512];
    int m[4];
    assert_int_equal(parse(yaml4, &s, err, sizeof err), 0);
    char *const rev[] = {"w3", "w2", "w1", "w0"};
    assert_int_equal(endpoints_map(&s, rev, 4, m, err, sizeof err), 1);   /* by name */
    assert_int_equal(m[0], 3);
    assert_int_equal(m[3], 0);
    assert_string_equal(err, "");
    char *const other[] = {"a", "b", "c", "d"};
    assert_int_equal(endpoints_map(&s, other, 4, m, err, sizeof err), 0);   /* by order */
    assert_int_equal(m[2], 2);
    assert_string_equal(err, "");
    char *const some[] = {"w3", "x", "y", "z"};
    assert_int_equal(endpoints_map(&s, some, 4, m, err, sizeof err), 0);
    assert_int_equal(m[0], 0);
    assert_non_null(strstr(err, "mapped by file order: only 1 of 4 endpoint names"));
    char *const twice[] = {"w0", "w0", "w2", "w3"};   /* not distinct: by order */
    assert_int_equal(endpoints_map(&s, twice, 4, m, err, sizeof err), 0);
    assert_int_equal(m[1], 1);
    assert_int_equal(endpoints_map(&s, NULL, 4, m, err, sizeof err), 0);
    assert_int_equal(endpoints_map(&s, workers, 3, m, err, sizeof err), -1);
    assert_string_equal(err, "endpoints.yaml has 4 endpoints; the model has 3 workers");
    endpoints_free(&s);
    /* the same name in two namespaces: distinct for llm-d, not a name map */
    const char *two = "endpoints:\n- {name: w0, namespace: a, address: 10.0.0.1, port: '1'}\n"
                      "- {name: w0, namespace: b, address: 10.0.0.2, port: '1'}\n";
    char *const w01[] = {"w1", "w0"};
    assert_int_equal(parse(two, &s, err, sizeof err), 0);
    assert_int_equal(endpoints_map(&s, w01, 2, m, err, sizeof err), 0);
    assert_int_equal(m[0], 0);
    endpoints_free(&s);
}

static const char yaml_b[] =
    "endpoints:\n"
    "  - {name: w1, address: 10.0.1.2, port: \"9000\"}\n"
    "  - {name: w0, address: 10.0.1.1, port: \"9000\"}\n"
    "  - {name: w3, address: 10.0.1.4, port: \"9000\"}\n"
    "  - {name: w2, address: 10.0.1.3, port: \"9000\"}\n";

static void assert_hostport(endpoints_table *t, int k, const char *want)
{
    char hp[EP_HOSTPORT_MAX];
    assert_int_equal(endpoints_table_hostport(t, k, hp), 0);
    assert_string_equal(hp, want);
}

static void test_table_reload(void **state)
{
    (void)state;
    char err[512], p[128];
    put("t.yaml", yaml4);
    path_of("t.yaml", p, sizeof p);
    endpoints_table *t = endpoints_table_open(p, workers, 4, 1.0, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(endpoints_table_generation(t), 1);
    assert_int_equal(endpoints_table_k(t), 4);
    assert_hostport(t, 2, "10.0.0.3:8001");
    /* unchanged: nothing */
    assert_int_equal(endpoints_table_poll(t, 2.0, err, sizeof err), 0);
    /* replaced by the same content: nothing */
    put("t.yaml", yaml4);
    assert_int_equal(endpoints_table_poll(t, 3.0, err, sizeof err), 0);
    assert_int_equal(endpoints_table_generation(t), 1);
    /* replaced: swapped in, mapped by name */
    put("t.yaml", yaml_b);
    assert_int_equal(endpoints_table_poll(t, 4.0, err, sizeof err), 1);
    assert_int_equal(endpoints_table_generation(t), 2);
    assert_hostport(t, 0, "10.0.1.1:9000");
    assert_hostport(t, 1, "10.0.1.2:9000");
    /* a bad file: refused once, the previous set stays */
    put("t.yaml", "endpoints:\n  - {name: w0, address: 10.0.1.1, port: \"x\"}\n");
    assert_int_equal(endpoints_table_poll(t, 5.0, err, sizeof err), -1);
    assert_non_null(strstr(err, "t.yaml:2: endpoints[0].port: \"x\" is not a port"));
    assert_int_equal(endpoints_table_poll(t, 6.0, err, sizeof err), 0);   /* not again */
    assert_hostport(t, 1, "10.0.1.2:9000");
    /* a count that does not match K, then the file gone: each refused once */
    put("t.yaml", "endpoints:\n  - {name: w0, address: 10.0.1.1, port: \"1\"}\n");
    assert_int_equal(endpoints_table_poll(t, 7.0, err, sizeof err), -1);
    assert_non_null(strstr(err, "t.yaml has 1 endpoint; the model has 4 workers"));
    unlink(p);
    assert_int_equal(endpoints_table_poll(t, 8.0, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot read"));
    assert_int_equal(endpoints_table_poll(t, 9.0, err, sizeof err), 0);
    ep_stats st;
    endpoints_table_stats(t, &st);
    assert_int_equal(st.reloads, 1);
    assert_int_equal(st.failed, 3);
    assert_int_equal(st.generation, 2);
    assert_int_equal(st.by_name, 1);
    assert_true(st.loaded_at == 4.0);
    /* back, modified in place (same inode, new size) */
    put("t.yaml", yaml_b);
    assert_int_equal(endpoints_table_poll(t, 10.0, err, sizeof err), 0);   /* same content */
    FILE *f = fopen(p, "a");
    fputs("# a comment\n", f);
    fclose(f);
    assert_int_equal(endpoints_table_poll(t, 11.0, err, sizeof err), 1);
    assert_int_equal(endpoints_table_generation(t), 3);
    endpoints_table_free(t);
}

static void test_table_symlink(void **state)
{
    (void)state;
    /* a ConfigMap: the path is a link through ..data, swapped atomically */
    char err[512], p[128], d1[128], d2[128], data[128], tmp[128];
    path_of("v1", d1, sizeof d1);
    path_of("v2", d2, sizeof d2);
    path_of("..data", data, sizeof data);
    path_of("..tmp", tmp, sizeof tmp);
    path_of("cm.yaml", p, sizeof p);
    mkdir(d1, 0700);
    mkdir(d2, 0700);
    put("v1/cm.yaml", yaml4);
    put("v2/cm.yaml", yaml_b);
    assert_int_equal(symlink("v1", data), 0);
    assert_int_equal(symlink("..data/cm.yaml", p), 0);
    endpoints_table *t = endpoints_table_open(p, NULL, 4, 0.0, err, sizeof err);
    assert_non_null(t);
    assert_hostport(t, 0, "10.0.0.1:8000");
    assert_int_equal(symlink("v2", tmp), 0);
    assert_int_equal(rename(tmp, data), 0);
    assert_int_equal(endpoints_table_poll(t, 1.0, err, sizeof err), 1);
    assert_hostport(t, 0, "10.0.1.2:9000");   /* no names: file order */
    endpoints_table_free(t);
}

static void test_table_remap_subset(void **state)
{
    (void)state;
    char err[512], p[128];
    put("r.yaml", yaml_b);
    path_of("r.yaml", p, sizeof p);
    assert_null(endpoints_table_open(p, workers, 3, 0.0, err, sizeof err));
    assert_non_null(strstr(err, "r.yaml has 4 endpoints; the model has 3 workers"));
    endpoints_table *t = endpoints_table_open(p, workers, 4, 0.0, err, sizeof err);
    assert_non_null(t);
    /* the subset hint's "ip:port" -> worker */
    assert_int_equal(endpoints_table_worker_of(t, "10.0.1.4:9000", 13), 3);
    assert_int_equal(endpoints_table_worker_of(t, "10.0.1.1:9000,x", 13), 0);
    assert_int_equal(endpoints_table_worker_of(t, "10.0.1.1:9001", 13), -1);
    assert_int_equal(endpoints_table_worker_of(t, "10.0.1.9:9000", 13), -1);
    assert_int_equal(endpoints_table_worker_of(t, "10.0.1.1", 8), -1);
    assert_int_equal(endpoints_table_worker_of(t, "10.0.1.1:", 9), -1);
    assert_int_equal(endpoints_table_worker_of(t, "[::1]:9000", 10), -1);
    /* a new model with other names: by order */
    char *const names[] = {"a", "b", "c", "d"};
    assert_int_equal(endpoints_table_remap(t, names, 4, err, sizeof err), 0);
    assert_int_equal(endpoints_table_generation(t), 2);
    assert_int_equal(endpoints_table_worker_of(t, "10.0.1.4:9000", 13), 2);
    /* a model of 5 workers: refused, the mapping of 4 stays */
    char *const five[] = {"a", "b", "c", "d", "e"};
    assert_int_equal(endpoints_table_remap(t, five, 5, err, sizeof err), -1);
    assert_string_equal(err, strcat(strcpy((char[160]){0}, p),
                                    " has 4 endpoints; the model has 5 workers"));
    assert_int_equal(endpoints_table_k(t), 4);
    assert_int_equal(endpoints_table_hostport(t, 4, (char[EP_HOSTPORT_MAX]){0}), -1);
    /* ... and the next file maps onto the 5 */
    put("r.yaml", "endpoints:\n- {name: e, address: 10.0.2.5, port: '1'}\n"
                  "- {name: d, address: 10.0.2.4, port: '1'}\n"
                  "- {name: c, address: 10.0.2.3, port: '1'}\n"
                  "- {name: b, address: 10.0.2.2, port: '1'}\n"
                  "- {name: a, address: 10.0.2.1, port: '1'}\n");
    assert_int_equal(endpoints_table_poll(t, 1.0, err, sizeof err), 1);
    assert_int_equal(endpoints_table_k(t), 5);
    assert_hostport(t, 4, "10.0.2.5:1");
    endpoints_table_free(t);
}

static void count_each(void *cls, int k, const endpoint *e)
{
    int *n = cls;
    assert_int_equal(k, *n);
    assert_non_null(e->name);
    (*n)++;
}

/* The sample, read by python3-yaml too: the same endpoints. */
static void test_sample_independent(void **state)
{
    (void)state;
    endpoint_set s;
    char err[512];
    assert_int_equal(endpoints_load("samples/endpoints.yaml", &s, err, sizeof err), 0);
    assert_int_equal(s.n, 8);
    FILE *py = popen("/usr/bin/python3 -c 'import yaml,sys\n"
                     "for e in yaml.safe_load(open(\"samples/endpoints.yaml\"))[\"endpoints\"]:\n"
                     "    print(e[\"name\"], e.get(\"namespace\") or \"default\", e[\"address\"], "
                     "int(e[\"port\"]), len(e.get(\"labels\") or {}))'", "r");
    assert_non_null(py);
    char line[256];
    for (int i = 0; i < s.n; i++) {
        char want[256];
        const endpoint *e = &s.v[i];
        snprintf(want, sizeof want, "%s %s %s %d %d\n", e->name, e->ns, e->address, e->port,
                 e->nlabels);
        assert_non_null(fgets(line, sizeof line, py));
        assert_string_equal(line, want);
    }
    assert_int_equal(pclose(py), 0);
    endpoints_free(&s);
    endpoints_table *t = endpoints_table_open("samples/endpoints.yaml", NULL, 8, 0, err, sizeof err);
    assert_non_null(t);
    int n = 0;
    endpoints_table_each(t, count_each, &n);
    assert_int_equal(n, 8);
    endpoints_table_free(t);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/eldr-endpoints-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Roles (llm-d's bylabel/roles.go): decode workers are the entries with
 * the decode role or none, prefill workers those with the prefill role;
 * a prefill-decode entry is both; the prefill ones map onto
 * --prefill-workers; a bare-IP subset entry marks every decode worker at
 * that address. */
static const char roles_json[] =
    "{\"endpoints\": [\n"
    " {\"name\": \"p0\", \"address\": \"10.0.2.1\", \"port\": \"8000\",\n"
    "  \"labels\": {\"llm-d.ai/role\": \"prefill\"}},\n"
    " {\"name\": \"w0\", \"address\": \"10.0.2.2\", \"port\": \"8000\"},\n"
    " {\"name\": \"w1\", \"address\": \"10.0.2.2\", \"port\": \"8001\",\n"
    "  \"labels\": {\"role\": \"decode\"}},\n"
    " {\"name\": \"b0\", \"address\": \"10.0.2.3\", \"port\": \"8000\",\n"
    "  \"labels\": {\"llm-d.ai/role\": \"prefill-decode\", \"role\": \"encode\"}},\n"
    " {\"name\": \"e0\", \"address\": \"10.0.2.4\", \"port\": \"8000\",\n"
    "  \"labels\": {\"role\": \"encode\"}}]}\n";

static void test_roles(void **state)
{
    (void)state;
    char err[512], p[128];
    endpoint_set s;
    assert_int_equal(endpoints_parse(roles_json, strlen(roles_json), "r.json", &s, err,
                                     sizeof err), 0);
    assert_int_equal(s.v[0].roles, EP_ROLE_PREFILL);
    assert_int_equal(s.v[1].roles, EP_ROLE_DECODE);
    assert_int_equal(s.v[2].roles, EP_ROLE_DECODE);
    assert_int_equal(s.v[3].roles, EP_ROLE_PREFILL | EP_ROLE_DECODE);   /* llm-d.ai/role wins */
    assert_int_equal(s.v[4].roles, EP_ROLE_ENCODE);
    int m[3];
    char *const dec[] = {"w1", "w0", "b0"};
    assert_int_equal(endpoints_map(&s, dec, 3, m, err, sizeof err), 1);
    assert_int_equal(m[0], 2);
    assert_int_equal(m[1], 1);
    assert_int_equal(m[2], 3);
    assert_int_equal(endpoints_map(&s, dec, 4, m, err, sizeof err), -1);
    assert_string_equal(err, "r.json has 3 decode endpoints; the model has 4 workers");
    char *const pre[] = {"x", "y"};
    assert_int_equal(endpoints_map_role(&s, EP_ROLE_PREFILL, pre, 2, m, err, sizeof err), 0);
    assert_int_equal(m[0], 0);   /* by file order */
    assert_int_equal(m[1], 3);
    assert_int_equal(endpoints_map_role(&s, EP_ROLE_PREFILL, pre, 1, m, err, sizeof err), -1);
    assert_string_equal(err, "r.json has 2 prefill endpoints; --prefill-workers names 1");
    endpoints_free(&s);

    const char bad[] = "{\"endpoints\": [{\"name\": \"a\", \"address\": \"10.0.0.1\", "
                       "\"port\": \"1\", \"labels\": {\"role\": \"prefil\"}}]}";
    assert_int_equal(endpoints_parse(bad, strlen(bad), "b.json", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "b.json:1: endpoints[0].labels.role: \"prefil\" is not one of "
                               "llm-d's roles"));

    put("roles.json", roles_json);
    path_of("roles.json", p, sizeof p);
    endpoints_table *t = endpoints_table_open(p, dec, 3, 0.0, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(endpoints_table_n_prefill(t), 0);   /* not set yet */
    char *const pw[] = {"p0", "b0"};
    assert_int_equal(endpoints_table_set_prefill(t, pw, 1, err, sizeof err), -1);
    assert_int_equal(endpoints_table_n_prefill(t), 0);   /* refused: the previous stays */
    assert_int_equal(endpoints_table_set_prefill(t, pw, 2, err, sizeof err), 0);
    assert_int_equal(endpoints_table_n_prefill(t), 2);
    char hp[EP_HOSTPORT_MAX];
    assert_int_equal(endpoints_table_prefill_hostport(t, 1, hp), 0);
    assert_string_equal(hp, "10.0.2.3:8000");
    assert_int_equal(endpoints_table_prefill_hostport(t, 2, hp), -1);
    /* the subset hint: ip:port exactly, a bare ip every port there */
    uint8_t mask[3] = {0};
    assert_int_equal(endpoints_table_subset(t, "10.0.2.2", 8, mask), 2);
    assert_true(mask[0] && mask[1] && !mask[2]);
    memset(mask, 0, sizeof mask);
    assert_int_equal(endpoints_table_subset(t, "10.0.2.2:8001", 13, mask), 1);
    assert_true(mask[0] && !mask[1] && !mask[2]);
    assert_int_equal(endpoints_table_subset(t, "10.0.2.2:8001", 13, mask), 0);   /* marked */
    assert_int_equal(endpoints_table_subset(t, "10.0.2.1", 8, mask), 0);   /* a prefill's */
    assert_int_equal(endpoints_table_subset(t, "10.0.2.9", 8, mask), 0);
    assert_int_equal(endpoints_table_subset(t, "10.0.2", 6, mask), -1);
    assert_int_equal(endpoints_table_subset(t, "", 0, mask), -1);
    assert_int_equal(endpoints_table_subset(t, "255.255.255.255", 15, mask), 0);
    endpoints_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_json_same),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_too_many),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_table_reload),
        cmocka_unit_test(test_table_symlink),
        cmocka_unit_test(test_table_remap_subset),
        cmocka_unit_test(test_sample_independent),
        cmocka_unit_test(test_roles),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

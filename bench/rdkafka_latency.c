/*
 * A fixed-rate librdkafka producer for scripts/bench (issue 10): sends COUNT records of SIZE
 * bytes at RATE records/s to TOPIC (keyless, librdkafka's default partitioner), with the
 * given producer properties (acks=all, linger.ms=0 by default in scripts/bench), and reports
 * the achieved rate and the produce latency (enqueue -> delivery report) as one JSON line:
 *   {"records":N,"errors":E,"records_per_sec":R,"latency_ms":{"p50":..,"p99":..,"p999":..,"max":..}}
 *
 * Before the timed run, one record per partition is produced and delivered (not counted): the
 * run measures the steady state at RATE, not librdkafka's start-up (bootstrap, metadata, one
 * connection and ApiVersions exchange per leader), which otherwise lands in the first
 * milliseconds' records and, on a loaded machine, in the p99 of a 10 s run.
 *
 * With statistics.interval.ms=N among the properties, librdkafka's statistics JSON (requests
 * per broker, in-flight and queued requests, messages per batch, RTT) goes to stderr every N ms,
 * one object a line: what locates a queue build-up.
 *
 * Build: gcc -O2 -o rdkafka_latency bench/rdkafka_latency.c -lrdkafka
 * Usage: rdkafka_latency BOOTSTRAP TOPIC RATE COUNT SIZE [key=value ...]
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double *latencies_ms;
static long delivered, errors;
static double last_delivery_s;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long warmup_left;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  (void)rk;
  (void)opaque;
  if (!m->_private) { /* a warm-up record */
    if (m->err)
      fprintf(stderr, "warm-up delivery failed: %s\n", rd_kafka_err2str(m->err));
    warmup_left--;
    return;
  }
  double now = now_s();
  double sent = *(double *)m->_private;
  free(m->_private);
  if (m->err) {
    if (errors++ < 5)
      fprintf(stderr, "delivery failed: %s\n", rd_kafka_err2str(m->err));
    return;
  }
  latencies_ms[delivered++] = (now - sent) * 1e3;
  last_delivery_s = now;
}

static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
  (void)rk;
  (void)opaque;
  fprintf(stderr, "%.*s\n", (int)len, json);
  return 0;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double percentile(long n, double p) {
  if (n == 0)
    return 0;
  long i = (long)(p * (double)(n - 1) + 0.5);
  return latencies_ms[i < n ? i : n - 1];
}

static void sleep_until(double t) {
  double left = t - now_s();
  if (left <= 0)
    return;
  struct timespec ts = {(time_t)left, (long)((left - (time_t)left) * 1e9)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* One record to every partition of TOPIC, each delivered, within 60 s. */
static int warm_up(rd_kafka_t *rk, const char *topic) {
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 30 * 1000);
  rd_kafka_topic_destroy(rkt);
  if (err || md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt <= 0) {
    fprintf(stderr, "warm-up: no metadata for %s: %s\n", topic,
            rd_kafka_err2str(err ? err : md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
    if (md)
      rd_kafka_metadata_destroy(md);
    return 1;
  }
  int partitions = md->topics[0].partition_cnt;
  rd_kafka_metadata_destroy(md);
  warmup_left = partitions;
  for (int p = 0; p < partitions; p++)
    if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(p),
                          RD_KAFKA_V_VALUE("warm-up", 7), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_END)) {
      fprintf(stderr, "warm-up: producing to partition %d failed\n", p);
      return 1;
    }
  double deadline = now_s() + 60;
  while (warmup_left > 0 && now_s() < deadline)
    rd_kafka_poll(rk, 10);
  if (warmup_left > 0) {
    fprintf(stderr, "warm-up: %ld of %d records undelivered after 60 s\n", warmup_left, partitions);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s BOOTSTRAP TOPIC RATE COUNT SIZE [key=value ...]\n", argv[0]);
    return 2;
  }
  const char *topic = argv[2];
  double rate = atof(argv[3]);
  long count = atol(argv[4]);
  size_t size = (size_t)atol(argv[5]);
  if (rate <= 0 || count <= 0) {
    fprintf(stderr, "RATE and COUNT must be positive\n");
    return 2;
  }
  char err[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  const char *defaults[][2] = {{"bootstrap.servers", argv[1]},
                               {"acks", "all"},
                               {"linger.ms", "0"},
                               {"queue.buffering.max.messages", "1000000"}};
  for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
    if (rd_kafka_conf_set(conf, defaults[i][0], defaults[i][1], err, sizeof err)) {
      fprintf(stderr, "%s\n", err);
      return 2;
    }
  for (int i = 6; i < argc; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq) {
      fprintf(stderr, "not key=value: %s\n", argv[i]);
      return 2;
    }
    *eq = 0;
    if (rd_kafka_conf_set(conf, argv[i], eq + 1, err, sizeof err)) {
      fprintf(stderr, "%s\n", err);
      return 2;
    }
  }
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_stats_cb(conf, on_stats);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!rk) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  if (warm_up(rk, topic) != 0)
    return 1;
  latencies_ms = calloc((size_t)count, sizeof *latencies_ms);
  char *payload = malloc(size ? size : 1);
  memset(payload, 'x', size);
  double start = now_s();
  for (long i = 0; i < count; i++) {
    sleep_until(start + (double)i / rate);
    double *sent = malloc(sizeof *sent);
    *sent = now_s();
    while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(payload, size),
                             RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(sent),
                             RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
      rd_kafka_poll(rk, 1);
    rd_kafka_poll(rk, 0);
  }
  rd_kafka_flush(rk, 120 * 1000);
  long lost = count - delivered - errors;
  double elapsed = (last_delivery_s > start ? last_delivery_s : now_s()) - start;
  qsort(latencies_ms, (size_t)delivered, sizeof *latencies_ms, by_value);
  printf("{\"records\":%ld,\"errors\":%ld,\"records_per_sec\":%.1f,\"elapsed_s\":%.3f,"
         "\"latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f}}\n",
         delivered, errors + lost, (double)delivered / elapsed, elapsed,
         percentile(delivered, 0.50), percentile(delivered, 0.99),
         percentile(delivered, 0.999), delivered ? latencies_ms[delivered - 1] : 0.0);
  rd_kafka_destroy(rk);
  return errors + lost ? 1 : 0;
}

/* kv_sub.h - --kv-events: a thread subscribed to vLLM's KV event
 * publishers (ZMQ PUB, one per prefill worker, in --prefill-workers
 * order), handing every batch to kv_apply (kv_apply.h), the path POST
 * /v1/kv-events takes too. Started and stopped by main.
 *
 * The wire (vllm/distributed/kv_events.py, ZmqEventPublisher, at commit
 * 0181ea3173e53eea8cf04a86891488e3dc89bb34): each message is three
 * frames, the topic, the sequence number (8 bytes big-endian, counting
 * from 0 in each publisher process) and the msgpack KVEventBatch
 * (kv_msgpack.h). The replay socket (ROUTER, vLLM's
 * --kv-events-config replay_endpoint) takes a request [empty delimiter,
 * 8-byte start sequence] and answers with one [empty, seq, payload]
 * message per buffered batch from that sequence on, then the end marker
 * [empty, 8 bytes of 0xff (-1), empty payload]; eldrd asks it through a
 * DEALER socket, since a REQ socket would take one answer only.
 *
 * Sequence numbers, per worker:
 * - the next one: applied;
 * - a jump ahead (a gap: the subscriber's queue overflowed, or the
 *   connection dropped a while): counted; with a replay endpoint the
 *   missed batches are asked for and applied in order; if none is
 *   configured, or it does not give back every one within a second, the
 *   worker's signature cache and hash map are emptied (distrusted): a lost
 *   AllBlocksCleared (vLLM's reset_prefix_cache, e.g. after a weight
 *   update) would otherwise leave counts of the old weights in the cache;
 * - one at or below the last (the publisher restarted, numbering from 0
 *   again: its KV cache starts empty): the worker's cache is emptied;
 * - the first one seen from a publisher's run (eldrd started after it, or
 *   it restarted) above 0: with a replay endpoint, the batches it still
 *   buffers before it are asked for and applied first (best effort), so
 *   that the hashes of blocks stored earlier are known.
 * ZMQ reconnects by itself (every 0.1 s, backing off to 2 s).
 * A message that is no batch costs that message, a bad event that event
 * (its batch's other events are applied); both are counted and logged
 * (at most once a second). */
#ifndef ELDR_ROUTER_KV_SUB_H
#define ELDR_ROUTER_KV_SUB_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct kvsub kvsub_t;

/* endpoints: "tcp://HOST:PORT,...", one per prefill worker; replay: the
 * same for the replay sockets, or NULL; topic: the topic subscribed
 * (vLLM's default is ""). NULL with err naming the option. */
kvsub_t *kvsub_start(engine_t *d, const char *endpoints, const char *replay, const char *topic,
                     char *err, size_t errlen);
/* Stop and join; NULL is a no-op. */
void kvsub_stop(kvsub_t *s);

/* What a message's sequence number means after the last one applied
 * (has_last 0: none yet, the first message is taken as it comes). */
typedef enum kvseq_step { KVSEQ_NEXT = 0, KVSEQ_GAP, KVSEQ_RESTART } kvseq_step;
kvseq_step kvseq_classify(int has_last, uint64_t last, uint64_t seq);

/* Largest message taken (ZMQ_MAXMSGSIZE): a publisher that sends a
 * bigger one is disconnected by ZMQ, and the reconnection is a gap. */
#define KVSUB_MAX_MSG (64LL << 20)
/* How long a replay may take before the cache is distrusted instead. */
#define KVSUB_REPLAY_SECONDS 1.0

#endif

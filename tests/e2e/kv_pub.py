#!/usr/bin/env python3
"""kv_pub.py - a stand-in for vLLM's KV event publisher, for tests/e2e/kv_events.sh.

It sends what vLLM's ZmqEventPublisher sends, as read in vllm-project/vllm:
- vllm/distributed/kv_events.py at commit 0181ea3173e53eea8cf04a86891488e3dc89bb34:
  a PUB socket bound to the endpoint; each batch is one multipart message
  (topic bytes, sequence number as 8 bytes big-endian counting from 0 in each
  process, the msgspec msgpack encoding of KVEventBatch); a replay ROUTER socket
  keeps the last buffer_steps (seq, payload) pairs and, for a request
  [identity, b"", start seq as 8 bytes], sends [identity, b"", seq, payload] for
  every buffered seq >= start, then [identity, b"", (-1) as 8 signed bytes, b""].
  KVEventBatch there encodes as a map (no array_like): {"ts", "events",
  "data_parallel_rank"}; the events are tagged structs, as maps with "type" first
  and omit_defaults (fields at their default None are left out; lora_id, medium
  and lora_name have no default and are always there).
- examples/features/kv_events/kv_events_subscriber.py at commit
  1bd773f6a52899e189c8237e55473cda0074f2fb decodes the batch array_like
  ([ts, events, data_parallel_rank]) with map events: form "array-maps".
- older releases had array_like=True on the events too (tagged arrays, the tag
  first, BlockStored [tag, block_hashes, parent_block_hash, token_ids,
  block_size, lora_id, medium]; docs.vllm.ai's stable kv_events_subscriber
  example): form "array".
- vllm/v1/core/block_pool.py (cache_full_blocks): BlockStored carries the new
  blocks' hashes, the parent's hash (None for a prompt's first block), the
  token ids of those blocks, block_size, lora_id None, medium "GPU",
  lora_name None and extra_keys, a list with one entry per block (None for
  plain text); BlockRemoved [hash], medium "GPU".
- vllm/v1/core/kv_cache_utils.py (maybe_convert_block_hash): a block hash is
  the sha256 digest as bytes, or with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES its
  low 64 bits as an int.

Usage: kv_pub.py PUB_PORT REPLAY_PORT TOPIC < commands
Prints "ready" once a subscriber has connected, then reads one JSON command a
line and prints "ok SEQ" (or "ok") after each:
  {"op": "send", "form": "map"|"array-maps"|"array", "events": [EV...],
   "drop": false}   drop: buffered for replay but not sent (a lost message)
  EV: {"stored": {"hashes": [H...], "parent": H|null, "tokens": [...],
       "block_size": 16}} | {"removed": [H...]} | {"cleared": true} |
      {"raw": VALUE} (put in the events array as it is: a bad event)
  H: an int, or "b:HEX" for bytes
  {"op": "mute_replay"}  replay requests go unanswered from now on
  {"op": "quit"}
"""
import json
import os
import select
import sys
import time

import msgpack
import zmq
import zmq.utils.monitor

END_SEQ = (-1).to_bytes(8, "big", signed=True)


def hash_value(h):
    if isinstance(h, str) and h.startswith("b:"):
        return bytes.fromhex(h[2:])
    return h


def event(ev, form):
    if "raw" in ev:
        return ev["raw"]
    if "stored" in ev:
        s = ev["stored"]
        hashes = [hash_value(h) for h in s["hashes"]]
        parent = hash_value(s["parent"]) if s.get("parent") is not None else None
        if form == "array":
            return ["BlockStored", hashes, parent, s["tokens"], s["block_size"], None, "GPU"]
        return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
                "token_ids": s["tokens"], "block_size": s["block_size"], "lora_id": None,
                "medium": "GPU", "lora_name": None, "extra_keys": [None] * len(hashes)}
    if "removed" in ev:
        hashes = [hash_value(h) for h in ev["removed"]]
        if form == "array":
            return ["BlockRemoved", hashes, "GPU"]
        return {"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}
    return ["AllBlocksCleared"] if form == "array" else {"type": "AllBlocksCleared"}


def batch(events, form):
    evs = [event(e, form) for e in events]
    ts = time.time()
    if form == "map":
        return {"ts": ts, "events": evs, "data_parallel_rank": 0}
    return [ts, evs, 0]


def main():
    pub_port, replay_port, topic = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.set_hwm(100_000)
    mon = pub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    pub.bind("tcp://127.0.0.1:%d" % pub_port)
    replay = ctx.socket(zmq.ROUTER)
    replay.bind("tcp://127.0.0.1:%d" % replay_port)
    # the subscriber reconnects by itself; wait for it, then for its subscription
    if not mon.poll(20000):
        print("no subscriber", flush=True)
        return 1
    zmq.utils.monitor.recv_monitor_message(mon)
    time.sleep(0.3)
    print("ready", flush=True)
    seq = 0
    buf = []
    serve_replay = True
    pending = b""
    while True:
        if replay.poll(0):
            frame = replay.recv_multipart()
            if serve_replay and len(frame) == 3:
                client, _, start = frame
                start_seq = int.from_bytes(start, "big")
                for s, p in buf:
                    if s >= start_seq:
                        replay.send_multipart((client, b"", s.to_bytes(8, "big"), p))
                replay.send_multipart((client, b"", END_SEQ, b""))
        if b"\n" not in pending:
            r, _, _ = select.select([0], [], [], 0.05)
            if r:
                chunk = os.read(0, 65536)
                if not chunk:
                    break
                pending += chunk
            continue
        line, pending = pending.split(b"\n", 1)
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        if cmd["op"] == "mute_replay":   # as a publisher without a replay socket
            serve_replay = False
            print("ok", flush=True)
            continue
        payload = msgpack.packb(batch(cmd["events"], cmd.get("form", "map")), use_bin_type=True)
        if not cmd.get("drop"):
            pub.send_multipart((topic.encode(), seq.to_bytes(8, "big"), payload))
        buf.append((seq, payload))
        buf = buf[-10_000:]
        print("ok %d" % seq, flush=True)
        seq += 1
    pub.close(linger=500)
    replay.close(linger=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

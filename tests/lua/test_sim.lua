-- Simulation, sweeps and the cost model.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)
local res, info = eldr.simulate(t, {workers = 4, rate = 4, output_tokens = 48, seed = 2})
T.ok(#res == 5 and res[1].policy == "eldr" and info.fitted and info.K == 4, "simulate default policies")
local served = 0
for _, s in ipairs(res[1].served) do served = served + s end
T.eq(served, info.eval_rows, "every evaluation request is served")
T.eq(info.calib_rows + info.eval_rows, #t, "split covers the trace")
local rules = 0
for _, c in pairs(res[1].rules) do rules = rules + c end
T.eq(rules, info.eval_rows, "one rule per decision")
local again = eldr.simulate(t, {workers = 4, rate = 4, output_tokens = 48, seed = 2})
T.ok(again[1].tpot_p50_ms == res[1].tpot_p50_ms and again[4].makespan_s == res[4].makespan_s, "deterministic for a seed")
local best = math.huge
for _, r in ipairs(res) do if r.policy ~= "eldr" and r.tpot_p50_ms < best then best = r.tpot_p50_ms end end
T.near(res[1].vs_best_pct, (res[1].tpot_p50_ms - best) / best * 100, 1e-9, "vs_best_pct against the best balancer")

-- a given model and calibration trace; per-request results
local calib, eval = eldr.calib_split(t, 200)
T.ok(#calib == 200 and #eval == 249, "calib_split counts")
local m = eldr.fit(calib, {k = 2})
local r2 = eldr.simulate(eval, {model = m, calib = calib, policy = {"eldr", "domain"},
                                rate = 8, output_tokens = 32, requests = true, series = true})
T.ok(#r2 == 2 and r2[2].policy == "domain" and #r2[1].requests == #eval and #r2[1].series > 0,
     "model, calib, domain, requests and series")
local ok_req = true
for _, q in ipairs(r2[1].requests) do
  ok_req = ok_req and q.finish >= q.start and q.start >= q.arrival and q.worker >= 1 and q.worker <= 2
end
T.ok(ok_req, "request times ordered")
local closed = eldr.simulate(eval, {model = m, calib = calib, policy = "jsq", concurrency = 8, output_tokens = 16})
T.ok(closed[1].mean_in_system <= 8 + 1e-9, "closed loop keeps concurrency")

-- the sweep grid
local rows = eldr.sweep(t, {workers = {2, 3}, tau = {0, 0.2}, rate = {4}, output_tokens = 32,
                            calib_split = 200})
T.eq(#rows, 2 * (3 + 2), "sweep rows: K x (baselines + taus)")
local has = false
for _, r in ipairs(rows) do has = has or (r.policy == "eldr" and r.tau == 0.2 and r.K == 3) end
T.ok(has, "sweep rows carry K and tau")
local tg = eldr.experiments.tau_grid(t, {taus = {0, 2}, workers = 2, rate = 4, output_tokens = 16})
T.eq(#tg, 5, "tau_grid rows")
local kg = eldr.experiments.k_grid(t, {ks = {2}, rate = 4, output_tokens = 16})
T.eq(#kg, 4, "k_grid rows")

-- cost model: fit recovers known coefficients from a noise-free profile
local truth = {t0 = 0.002, b = 0.00004, c = 0.00001}
local csv = T.tmp .. "/profile.csv"
local f = io.open(csv, "w")
f:write("batch,U_sum,layers,step_ms\n")
for i = 1, 40 do
  local batch, u = 1 + (i * 7) % 31, 100 + (i * 13) % 97
  f:write(string.format("%d,%d,24,%.12f\n", batch, u, (truth.t0 + truth.b * u + truth.c * batch) * 1e3))
end
f:close()
local fit = eldr.costfit(csv, {output = T.tmp .. "/cost.json"})
T.ok(math.abs(fit.t0 - truth.t0) < 1e-9 and math.abs(fit.b - truth.b) < 1e-11
     and math.abs(fit.c - truth.c) < 1e-11 and fit.r2 > 0.999999, "costfit recovers the coefficients")
local loaded = eldr.cost_model(T.tmp .. "/cost.json")
T.near(loaded.b, fit.b, 1e-12, "cost file round trip")
local U = {}
for l = 1, 24 do U[l] = 5 end
T.near(eldr.step_time(loaded, U, 8), loaded.t0 + 24 * loaded.a + 120 * loaded.b + 8 * loaded.c, 1e-12,
       "step_time is the formula")
local slow = eldr.simulate(eval, {model = m, calib = calib, policy = "jsq", rate = 4, output_tokens = 16,
                                  cost = {t0 = 0.05}})
local fast = eldr.simulate(eval, {model = m, calib = calib, policy = "jsq", rate = 4, output_tokens = 16})
T.ok(slow[1].tpot_p50_ms > fast[1].tpot_p50_ms, "cost option changes step time")

T.err(function() eldr.simulate(t, {policy = "fastest"}) end, "bad argument 'policy'", "unknown policy")
T.err(function() eldr.simulate(t, {rate = 2, concurrency = 3}) end, "rate and concurrency exclude", "rate xor concurrency")
T.err(function() eldr.simulate(t, {model = m, workers = 3}) end, "bad argument 'workers'", "workers vs model")
T.err(function() eldr.costfit("/nonexistent.csv") end, "eldr.costfit: ", "costfit missing file")

-- the prefix-caching what-if: prompts sharing 6-block prefixes in 10 groups
local pt = eldr.gen{requests = 300, layers = 8, experts = 32, top_k = 4, prefix_groups = 10,
                    prefix_blocks = 6, prompt_tokens = 40, decode_tokens = 24, tokens = true, seed = 3}
local popt = {workers = 4, rate = 200, calib_split = 100, seed = 5, policy = {"eldr", "jsq"}}
local function with(extra)
  local o = {}
  for k, v in pairs(popt) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end
local pres, pinfo = eldr.simulate(pt, with{prefix_mode = "all", requests = true})
local by = {}
for _, r in ipairs(pres) do by[r.policy] = r end
T.ok(#pres == 4 and pres[1].policy == "eldr-cold" and pres[2].policy == "eldr-cache"
     and pres[3].policy == "eldr-uncached" and pres[4].policy == "jsq", "prefix modes: one row per mode, in order")
local cold, cache, unc = by["eldr-cold"], by["eldr-cache"], by["eldr-uncached"]
local same_metrics = true
for _, k in ipairs{"tpot_p50_ms", "tpot_p99_ms", "queue_p50_ms", "distinct_per_step", "reuse",
                   "imbalance", "makespan_s", "steps", "activations"} do
  same_metrics = same_metrics and cache[k] == cold[k]
end
for i = 1, #cold.requests do
  same_metrics = same_metrics and cache.requests[i].worker == cold.requests[i].worker
end
T.ok(same_metrics, "prefix cache mode equals cold: same metrics, same workers")
T.eq(cache.same_worker_as_cold, 1.0, "cache agrees with cold on every request")
T.near(cache.signature_cosine_vs_cold, 1.0, 1e-6, "cache signatures are cold's")
T.ok(unc.same_worker_as_cold < cache.same_worker_as_cold
     and unc.signature_cosine_vs_cold < cache.signature_cosine_vs_cold - 1e-3,
     "uncached agreement strictly lower", string.format("same %.3f cos %.4f", unc.same_worker_as_cold,
                                                        unc.signature_cosine_vs_cold))
local px = pinfo.prefix
T.ok(px and px.hit_rate > 0 and px.hit_blocks > 0 and px.recovered_mismatches == 0
     and px.recovered_equal_cold == pinfo.eval_rows, "prefix info: hits and exact recovery")
local hits = 0
for _, h in ipairs(px.hit) do hits = hits + h end
T.ok(#px.hit == pinfo.eval_rows and hits == px.hit_blocks and px.cached_tokens == hits * px.block_size
     and math.abs(px.hit_rate - px.hit_blocks / px.blocks) < 1e-12, "prefix info: per-request hits add up")
-- oracle: plain eldr (no prefix replay, signatures from the workload) routes as eldr-cold
local plain = eldr.simulate(pt, with{requests = true})
local agree = plain[1].tpot_p50_ms == cold.tpot_p50_ms
for i = 1, #cold.requests do agree = agree and plain[1].requests[i].worker == cold.requests[i].worker end
T.ok(agree, "eldr-cold routes exactly as plain eldr")
-- uncached alone: its agreement is measured against a reference cold run
local only = eldr.simulate(pt, with{prefix_mode = {"uncached"}})
T.ok(#only == 2 and only[1].policy == "eldr-uncached" and only[1].same_worker_as_cold == unc.same_worker_as_cold,
     "one mode alone, agreement against a reference cold run")
-- no prefix cache: nothing hits, the fresh counts are the cold counts
local nocache, ninfo = eldr.simulate(pt, with{prefix_mode = "cold,uncached", prefix_cache = 0})
T.ok(ninfo.prefix.hit_rate == 0 and nocache[2].same_worker_as_cold == 1
     and nocache[2].tpot_p50_ms == nocache[1].tpot_p50_ms, "prefix_cache = 0: uncached equals cold")
local _, rinfo = eldr.simulate(pt, with{prefix_mode = "cache", prefill_workers = 4, prefill_route = "prefix"})
local _, qinfo = eldr.simulate(pt, with{prefix_mode = "cache", prefill_workers = 4, prefill_route = "rr"})
T.ok(rinfo.prefix.prefill_workers == 4 and rinfo.prefix.prefill_route == "prefix"
     and rinfo.prefix.hit_rate > qinfo.prefix.hit_rate, "prefix-aware prefill routing hits more than rr",
     string.format("prefix %.3f rr %.3f", rinfo.prefix.hit_rate, qinfo.prefix.hit_rate))

T.err(function() eldr.simulate(pt, with{prefix_mode = "x"}) end,
      "eldr.simulate: bad argument 'prefix_mode' (cold, cache, uncached or all expected, got 'x')", "bad prefix_mode")
T.err(function() eldr.simulate(pt, with{prefix_mode = {"cold", 3}}) end, "bad argument 'prefix_mode'",
      "prefix_mode list with a number")
T.err(function() eldr.simulate(pt, with{prefix_mode = {}}) end, "bad argument 'prefix_mode'", "empty prefix_mode")
T.err(function() eldr.simulate(pt, with{prefix_cache = 8}) end, "'prefix_cache' needs prefix_mode",
      "prefix option without prefix_mode")
T.err(function() eldr.simulate(pt, with{prefix_mode = "all", policy = "jsq"}) end, "needs the eldr policy",
      "prefix_mode without eldr")
T.err(function() eldr.simulate(pt, with{prefix_mode = "all", prefix_cache = -1}) end,
      "bad argument 'prefix_cache'", "negative prefix_cache")
T.err(function() eldr.simulate(pt, with{prefix_mode = "all", prefill_workers = 0}) end,
      "bad argument 'prefill_workers'", "zero prefill workers")
T.err(function() eldr.simulate(pt, with{prefix_mode = "all", prefill_route = "hash"}) end,
      "bad argument 'prefill_route' (rr or prefix expected, got 'hash')", "bad prefill_route")
T.err(function() eldr.simulate(pt, with{prefix_mode = "all", block_size = 8}) end,
      "wrong --block-size", "block_size that disagrees with the hashes")
T.err(function() eldr.simulate(eval, {model = m, calib = calib, prefix_mode = "all", rate = 4}) end,
      "eldr.simulate: prefix what-if: the trace has no tokens/block_hashes", "trace without block hashes")
T.done()

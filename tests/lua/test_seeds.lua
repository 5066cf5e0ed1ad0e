-- Seeds and confidence intervals in Lua: eldr.simulate{seeds = N} (the
-- same numbers as `eldr sim --seeds N --json`), a tau list, eldr.sweep
-- with seeds, eldr.advise (as `eldr advise --json`), progress callbacks
-- and bad arguments.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)

local cli_json = T.cli_json

-- simulate with seeds = 3: means, CIs, per-seed values
local opts = {workers = 4, rate = 60, seeds = 3}
local res, info = eldr.simulate(t, opts)
T.ok(info.seeds == 3 and #res == 5, "simulate seeds: one row per policy")
local e = res[1]
T.ok(e.policy == "eldr" and e.seeds == 3 and #e.tpot_p50_ms_per_seed == 3
     and #e.tpot_p50_ms_ci95 == 2 and #e.vs_best_pct_ci95 == 2, "simulate seeds: CI fields")
-- the mean and the Student t interval (t_0.975 with 2 df = 4.303)
local x = e.tpot_p50_ms_per_seed
local m = (x[1] + x[2] + x[3]) / 3
local var = ((x[1] - m) ^ 2 + (x[2] - m) ^ 2 + (x[3] - m) ^ 2) / 2
local half = 4.303 * math.sqrt(var / 3)
T.near(e.tpot_p50_ms, m, 1e-12, "simulate seeds: tpot_p50_ms is the mean over seeds")
T.near(e.tpot_p50_ms_ci95[2] - e.tpot_p50_ms_ci95[1], 2 * half, 1e-3, "simulate seeds: 95% t interval")
-- each seed draws its own split, and info says what the interval covers
T.ok(info.split_redrawn == true and info.ci_covers:find("each drawing its arrivals and its random "
     .. "calibration split", 1, true), "simulate seeds: the interval covers the split too")
local pin, pinfo = eldr.simulate(t, {workers = 4, rate = 60, seeds = 3, split_seed = 2})
T.ok(pinfo.split_redrawn == false and pinfo.ci_covers:find("one random split, seed 2 (pinned)",
     1, true), "simulate seeds: a pinned split says the interval is over arrivals only")
local two = eldr.simulate(t, {workers = 4, rate = 60, seed = 2, split_seed = 2})
T.eq(x[2], two[1].tpot_p50_ms, "simulate seeds: seed 2 is split 2 pinned, one seed")
local one = eldr.simulate(t, {workers = 4, rate = 60})
T.eq(x[1], one[1].tpot_p50_ms, "simulate seeds: the first seed is the single run")
T.ok(x[2] ~= x[1], "simulate seeds: the seeds differ")
-- the same numbers as the CLI
local cli = cli_json("sim " .. T.data .. " --workers 4 --rate 60 --seeds 3 --json")
local okc = cli and #cli.policies == 5 and cli.baseline == info.baseline
for k, p in ipairs(cli and cli.policies or {}) do
  local r = res[k]
  okc = okc and p.name == r.policy and math.abs(p.tpot_p50_ms - r.tpot_p50_ms) < 1e-6
        and math.abs(p.tpot_p50_ms_ci95[1] - r.tpot_p50_ms_ci95[1]) < 1e-6
        and math.abs(p.tpot_p50_ms_ci95[2] - r.tpot_p50_ms_ci95[2]) < 1e-6
        and math.abs(p.vs_baseline_tpot_p50_pct - r.vs_best_pct) < 1e-6
        and math.abs(p.vs_baseline_tpot_p50_pct_ci95[2] - r.vs_best_pct_ci95[2]) < 1e-6
end
T.ok(okc, "simulate seeds = eldr sim --seeds 3 --json")
T.eq(cli and cli.split.text, info.split.text, "simulate and eldr sim say the same split")

-- a list of taus: one ELDR row per tau
local rt = eldr.simulate(t, {workers = 4, rate = 60, policy = {"rr", "eldr"}, tau = {0, 0.1, 2}})
T.ok(#rt == 4 and rt[2].tau == 0 and rt[4].tau == 2 and rt[1].tau == nil, "simulate tau list")
local r01 = eldr.simulate(t, {workers = 4, rate = 60, policy = {"rr", "eldr"}, tau = 0.1})
T.eq(rt[3].tpot_p50_ms, r01[2].tpot_p50_ms, "simulate tau list row = a single-tau run")
T.err(function() eldr.simulate(t, {tau = {0, -1}, rate = 4}) end, "eldr.simulate: bad argument 'tau'", "simulate bad tau")

-- progress
local calls, last, mono = 0, 0, true
eldr.simulate(t, {workers = 4, rate = 60, seeds = 4, policy = {"eldr", "rr"},
                  progress = function(d, n) calls = calls + 1; mono = mono and d > last and n == 4; last = d end})
T.ok(calls >= 1 and last == 4 and mono, "simulate seeds: progress(done, total) up to total")
local c1 = 0
eldr.simulate(t, {workers = 4, rate = 60, policy = {"eldr", "rr", "jsq"}, progress = function(d, n) c1 = n end})
T.eq(c1, 3, "simulate one seed: progress per policy")
T.err(function() eldr.simulate(t, {rate = 60, seeds = 2, progress = function() error("stop here") end}) end,
      "stop here", "simulate: an error in progress is raised")
T.err(function() eldr.simulate(t, {rate = 60, progress = 3}) end, "eldr.simulate: bad argument 'progress'",
      "simulate bad progress")
T.err(function() eldr.simulate(t, {rate = 60, seeds = 0}) end, "eldr.simulate: bad argument 'seeds'",
      "simulate bad seeds")

-- eldr.sweep with seeds: rows carry the CIs, and split passes through
local rows = eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = {60}, seeds = 3})
local er
for _, r in ipairs(rows) do if r.policy == "eldr" then er = r end end
T.ok(#rows == 4 and er and er.seeds == 3 and #er.tpot_p50_ms_ci95 == 2 and #er.vs_best_pct_ci95 == 2,
     "sweep seeds: rows carry CIs")
local rows_h = eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = {60}, split = "head"})
local rows_r = eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = {60}})
T.ok(rows_h[1].tpot_p50_ms ~= rows_r[1].tpot_p50_ms, "sweep split passes through")
local rows_s = eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = {60}, split_seed = 5})
T.ok(rows_s[1].tpot_p50_ms ~= rows_r[1].tpot_p50_ms, "sweep split_seed passes through")
T.ok(rows_r[1].seeds == nil and rows_r[1].tpot_p50_ms_ci95 == nil, "sweep one seed: no CI")
T.err(function() eldr.sweep(t, {workers = {4}, rate = {60}, split = "last"}) end,
      "eldr.sweep: bad argument 'split'", "sweep bad split")
T.err(function() eldr.sweep(t, {workers = {4}, rate = {60}, split_seed = -2}) end,
      "eldr.sweep: bad argument 'split_seed'", "sweep bad split_seed")
T.err(function() eldr.experiments.tau_grid(t, {workers = 4, rate = 60, calib_split = -1}) end,
      "eldr.sweep: bad argument 'calib_split'", "tau_grid bad calib_split")
T.err(function() eldr.sweep(t, {workers = {4}, rate = {60}, seeds = 0}) end,
      "eldr.sweep: bad argument 'seeds'", "sweep bad seeds")

-- every path of eldr.sweep answers with the verdict engine: one seed (each
-- split kind), a closed loop, online refits, seeds over a pinned split
local function v1(o)
  o.workers, o.tau = o.workers or {4}, o.tau or {0.1}
  local _, info = eldr.sweep(t, o)
  return info.verdicts and #info.verdicts == 1 and info.verdicts[1] or {}
end
for _, o in ipairs({{rate = {60}}, {rate = {60}, split = "head"}, {rate = {60}, split_seed = 5},
                    {concurrency = 8}, {rate = {60}, online = true}}) do
  local v = v1(o)
  T.ok(v.answer == "none" and v.why == "one_seed" and v.head == "no verdict at K 4" and
       v.reason:find("^one seed gives no interval") ~= nil, "sweep one seed: no verdict, said so", v.head)
end
local vp = v1({rate = {60}, seeds = 3, split_seed = 5})
T.ok(vp.answer ~= nil and vp.answer ~= "none" and vp.comparisons == 1 and vp.baselines == "jsq,rr,p2c",
     "sweep seeds on a pinned split: a verdict by the rule", vp.answer)
T.err(function() eldr.sweep(t, {workers = {4}, rate = {60}, concurrency = 4}) end,
      "eldr.sweep: bad argument 'concurrency'", "sweep rate and concurrency refused")

-- eldr.advise: the recommendation and the grid, as eldr advise --json
local pc, plast = 0, 0
local a = eldr.advise(t, {workers = {2, 4}, tau = {0, 0.1}, rate = 60, seeds = 3, compare_fleets = true,
                          progress = function(d, n) pc = pc + 1; plast = d end})
local rec = a.recommendation
T.ok(rec and rec.policy and rec.workers and rec.rate == 60 and rec.tpot_p50_ms and rec.sentence
     and type(rec.eldr_beats_baseline) == "boolean", "advise: recommendation fields")
T.eq(#a.grid, 2 * (3 + 2), "advise: grid rows K x (baselines + taus)")
local g = a.grid[rec.grid_index]
T.ok(g and g.policy == rec.policy and g.K == rec.workers and g.tau == rec.tau
     and g.tpot_p50_ms == rec.tpot_p50_ms, "advise: the recommended row is in the grid")
T.ok(a.split.mode == "random" and a.seeds == 3 and pc >= 1 and plast == 6, "advise: split, seeds, progress")
T.ok(a.split_redrawn == true and a.ci_covers:find("each drawing its arrivals", 1, true),
     "advise: the interval covers the split too")
if rec.eldr_beats_baseline then
  T.ok(a.verdict.p50_ci_corrected[2] < 0 and rec.policy == "eldr", "advise: an ELDR win is beyond noise")
else
  T.ok(rec.policy ~= "eldr" and rec.tau == nil, "advise: keep the baseline")
end
local ca = cli_json("advise " .. T.data .. " --workers 2,4 --tau 0,0.1 --rate 60 --seeds 3 --compare-fleets --json")
T.ok(ca and ca.recommendation.sentence == a.verdict.reason and ca.recommendation.grid_index + 1 == rec.grid_index
     and ca.verdict.head == a.verdict.head and ca.verdict.answer == a.verdict.answer and #ca.grid == #a.grid,
     "advise = eldr advise --json")
T.err(function() eldr.advise(t, {rate = 60, workers = {2, 4}, seeds = 2}) end,
      "the fleet has one K; give its K, or compare_fleets = true", "advise: one K unless fleets are compared")
T.ok(#a.verdicts == 2 and a.verdicts[1].K == 2 and a.verdicts[2].K == 4, "advise: a verdict per K too")
T.err(function() eldr.advise(t, {rate = 60, p99_margin = "x"}) end, "eldr.advise: bad argument 'p99_margin'",
      "advise bad p99_margin")
T.err(function() eldr.advise(t, {rate = 60, tps_margin = -1}) end, "eldr.advise: bad argument 'tps_margin'",
      "advise bad tps_margin")
T.err(function() eldr.advise(t, {rate = 60, compare_fleets = 1}) end,
      "eldr.advise: bad argument 'compare_fleets'", "advise: compare_fleets is a boolean")
-- one K, one tau: the sentence names them
local a1 = eldr.advise(t, {workers = 4, tau = 0.1, rate = 60, seeds = 2, baselines = {"rr"}})
T.ok(#a1.grid == 2 and a1.grid[1].policy == "rr" and a1.grid[2].tau == 0.1, "advise: scalar options and baselines")
T.err(function() eldr.advise(t, {rate = 60, seeds = 1}) end, "eldr.advise: bad argument 'seeds'", "advise seeds >= 2")
T.err(function() eldr.advise(t, {rate = 60, workers = 0}) end, "eldr.advise: bad argument 'workers'", "advise bad workers")
T.err(function() eldr.advise(t, {rate = 60, baselines = {"eldr"}}) end, "eldr.advise: bad argument 'baselines'",
      "advise eldr is not a baseline")
T.err(function() eldr.advise(t, {rate = 60, calib_split = 0}) end, "eldr.advise: bad argument 'calib_split'",
      "advise needs calibration rows")
local _, dinfo = eldr.simulate(t, {policy = "rr"})
T.ok(dinfo.rate_default == true and dinfo.rate == 20, "simulate: no arrival_s and no rate: the default 20 req/s, said in info")
local _, rinfo = eldr.simulate(t, {policy = "rr", rate = 30})
T.ok(rinfo.rate_default == false and rinfo.rate == 30, "simulate: a given rate is not the default")
T.err(function() eldr.advise(t, {rate = 60, split = "x"}) end, "eldr.advise: bad argument 'split'", "advise bad split")
T.err(function() eldr.advise(t, {rate = 60, progress = "no"}) end, "eldr.advise: bad argument 'progress'",
      "advise bad progress")
T.err(function() eldr.advise(t, {rate = 60, tau = {}}) end, "eldr.advise: bad argument 'tau'", "advise empty tau")
T.err(function() eldr.advise(t, {rate = 60, sweep = true}) end, "eldr.advise: unknown option", "advise unknown option")
T.err(function() eldr.advise("t.h5", {rate = 60}) end, "eldr.advise: bad argument 'trace'", "advise needs a Trace")
T.err(function() eldr.advise(t, {rate = 60, seeds = 2, workers = 2, tau = 0,
                                 progress = function() error("halt") end}) end, "halt",
      "advise: an error in progress is raised")
local m = eldr.fit(eldr.calib_split(t), {k = 2})
T.err(function() eldr.advise(t, {rate = 60, model = m, variant = "count"}) end, "eldr.advise: bad argument 'variant'",
      "advise: the model gives the recipe")
local am = eldr.advise(t, {rate = 60, model = m, tau = 0.1, seeds = 2})
T.ok(am.grid[1].K == 2 and am.variant == m:info().variant, "advise: K and recipe from the model")

T.done()

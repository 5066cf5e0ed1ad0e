-- The cost rule (eldr-cost, issue 33) in Lua: eldr.simulate with policy
-- "eldr-cost" (alone: no model; beside eldr; with seeds) gives the same
-- numbers as `eldr sim --json`; eldr.sweep and eldr.advise take
-- cost_rule = true as `eldr sweep/advise --cost-rule` (the same rows, the
-- same recommendation); bad arguments name the option.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)
local cli_json = T.cli_json

local function same(a, b) return type(a) == "number" and type(b) == "number" and math.abs(a - b) < 1e-6 end

-- alone: no model is fitted; every decision is the cost rule's
local res, info = eldr.simulate(t, {policy = "eldr-cost", workers = 4, rate = 60})
T.ok(#res == 1 and res[1].policy == "eldr-cost" and info.fitted == false and res[1].tau == nil,
     "simulate eldr-cost alone: no fit, no tau")
T.eq(res[1].rules.cost, info.eval_rows, "simulate eldr-cost: every decision by rule cost")
local cli = cli_json("sim " .. T.data .. " --policy eldr-cost --workers 4 --rate 60 --json")
local p = cli and cli.policies[1]
local ok = p and p.name == "eldr-cost" and same(p.tpot_p50_ms, res[1].tpot_p50_ms)
  and same(p.tpot_p99_ms, res[1].tpot_p99_ms) and same(p.queue_p50_ms, res[1].queue_p50_ms)
  and p.steps == res[1].steps and cli.requests == info.eval_rows
for k = 1, 4 do ok = ok and p.served[k] == res[1].served[k] end
T.ok(ok, "simulate eldr-cost = eldr sim --policy eldr-cost --json (rows, seed 1)")

-- beside eldr and jsq, three seeds: the same numbers as the CLI, and the
-- eldr-cost row the same run as alone
local pol = {"eldr", "eldr-cost", "jsq"}
local r3, i3 = eldr.simulate(t, {policy = pol, workers = 4, rate = 60, seeds = 3})
local c3 = cli_json("sim " .. T.data .. " --policy eldr,eldr-cost,jsq --workers 4 --rate 60 --seeds 3 --json")
local ok3 = c3 and #c3.policies == 3 and c3.baseline == i3.baseline
for k, q in ipairs(c3 and c3.policies or {}) do
  local r = r3[k]
  ok3 = ok3 and q.name == pol[k] and r.policy == pol[k] and same(q.tpot_p50_ms, r.tpot_p50_ms)
    and same(q.tpot_p50_ms_ci95[1], r.tpot_p50_ms_ci95[1]) and same(q.tpot_p50_ms_ci95[2], r.tpot_p50_ms_ci95[2])
    and same(q.vs_baseline_tpot_p50_pct, r.vs_best_pct)
end
T.ok(ok3, "simulate eldr,eldr-cost,jsq seeds 3 = eldr sim --seeds 3 --json")
T.eq(r3[2].tpot_p50_ms_per_seed[1], res[1].tpot_p50_ms, "simulate seeds: eldr-cost's first seed is the single run")

-- sweep with cost_rule = true: the same rows as eldr sweep --cost-rule
local rows = eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = {60}, seeds = 3, cost_rule = true})
local cw = cli_json("sweep " .. T.data .. " --workers 4 --tau 0.1 --rate 60 --seeds 3 --cost-rule --json")
local okw = cw and #cw.rows == #rows and #rows == 5 and rows[5].policy == "eldr-cost" and rows[5].tau == nil
for k, q in ipairs(cw and cw.rows or {}) do
  okw = okw and q.policy == rows[k].policy and same(q.tpot_p50_ms, rows[k].tpot_p50_ms)
    and same(q.vs_best_pct, rows[k].vs_best_pct)
end
T.ok(okw, "sweep cost_rule = eldr sweep --cost-rule --json")
T.eq(rows[5].tpot_p50_ms_per_seed[1], res[1].tpot_p50_ms, "sweep: eldr-cost's first seed is the single run")
-- the one-split path (a head split) adds it too, after eldr
local rh = eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = {60}, split = "head", cost_rule = true})
T.ok(#rh == 5 and rh[4].policy == "eldr" and rh[5].policy == "eldr-cost", "sweep one split: eldr-cost row")

-- advise: eldr-cost is one more setting of the correction
local a = eldr.advise(t, {workers = 4, tau = {0, 0.1}, rate = 60, seeds = 3, cost_rule = true})
local ca = cli_json("advise " .. T.data .. " --workers 4 --tau 0,0.1 --rate 60 --seeds 3 --cost-rule --json")
local rec = a.recommendation
T.ok(#a.grid == 6 and a.grid[6].policy == "eldr-cost" and a.verdict.comparisons == 3,
     "advise cost_rule: eldr-cost row, 3 settings compared")
T.ok(ca and ca.verdict.reason == a.verdict.reason and ca.recommendation.grid_index + 1 == rec.grid_index
     and ca.verdict.comparisons == a.verdict.comparisons and ca.recommendation.policy == rec.policy,
     "advise cost_rule = eldr advise --cost-rule --json")

-- the dashboard: policy "eldr-cost" is shown, in the header and the overview
local f = eldr.dash(t, {policy = "eldr-cost", frame = true, width = 100, height = 30})
T.ok(f:match("\neldr%-cost K 4 ") and f:match("\n +eldr%-cost +[%d.]+ "),
     "dash policy eldr-cost: header and overview")
T.err(function() eldr.dash(t, {policy = "domain", frame = true}) end,
      "eldr, eldr-cost, random, rr, jsq or p2c expected", "dash: policy names eldr-cost")

-- bad arguments
T.err(function() eldr.advise(t, {rate = 60, baselines = {"jsq", "eldr-cost"}}) end,
      "eldr-cost is cost_rule = true", "advise: eldr-cost is not a baseline")
T.err(function() eldr.sweep(t, {workers = {4}, rate = {60}, baselines = {"eldr-cost"}}) end,
      "eldr-cost is cost_rule = true", "sweep: eldr-cost is not a baseline")
T.err(function() eldr.sweep(t, {workers = {4}, rate = {60}, cost_rule = 1}) end,
      "eldr.sweep: bad argument 'cost_rule'", "sweep: cost_rule is a boolean")
T.err(function() eldr.advise(t, {rate = 60, cost_rule = "yes"}) end,
      "eldr.advise: bad argument 'cost_rule'", "advise: cost_rule is a boolean")
T.err(function() eldr.simulate(t, {policy = "eldr-costs"}) end, "eldr-cost,",
      "simulate: an unknown policy lists eldr-cost")

T.done()

-- tests/e2e/attach.lua - run by tests/e2e/attach.sh with `eldr run`:
--   attach.lua URL SNAPSHOT_FILE DEAD_URL
-- against an eldrd that has routed (and finished) the small sample.
local url, snapfile, dead = arg[1], arg[2], arg[3]
local n_ok, n_bad = 0, 0
local function ok(cond, name, detail)
  if cond then n_ok = n_ok + 1; print("ok - attach: " .. name)
  else n_bad = n_bad + 1; print("not ok - attach: " .. name); if detail then print("#   " .. tostring(detail)) end end
end

local r = eldr.attach(url)
ok(tostring(r):find("Router<", 1, true) and r:url() == url, "attach and url", tostring(r))
local s = r:snapshot()
ok(s.format == "eldr-router-snapshot" and #s.workers == 4 and s.model.K == 4, "snapshot", s.format)
local routed = 0
for _, w in ipairs(s.workers) do routed = routed + w.routed end
ok(routed == 600, "snapshot counts the replayed requests", routed)
ok(math.abs(s.tau - 0.1) < 1e-12, "tau starts at the model's", s.tau)
ok(r:set_tau(0.3) == 0.3 and math.abs(r:snapshot().tau - 0.3) < 1e-12, "set_tau changes the daemon's tau")
ok(not pcall(r.set_tau, r, -1), "set_tau rejects a negative tau")

local d = r:decisions(5)
ok(#d == 5 and d[1].seq > d[2].seq, "decisions(5): five, newest first", #d)
local e = r:explain(d[1].request_id)
ok(e.request_id == d[1].request_id and e.worker == d[1].worker and #e.similarities == 4,
   "explain a recent decision")
local okx, msg = pcall(r.explain, r, "no-such-request")
ok(not okx and tostring(msg):find("404", 1, true), "explain of an unknown id raises the 404", msg)

-- the window and the live model: the daemon's decision is reproduced offline
local w = r:window(100)
local n, dim = w.sigs:dims()
ok(n == 100 and dim == s.model.dim and #w.ids == 100, "window(100): signatures of the model's dim", n)
local m = r:model()
ok(m:info().K == 4 and #m:workers() == 4 and m:workers()[1] == s.workers[1].name, "model() of the live daemon")
local same = true
for i = 1, 5 do
  local ex = r:explain(w.ids[i])
  local loads = {}
  for k = 1, 4 do loads[k] = ex.loads[k] end
  local dec = m:route(w.sigs:row(i), loads, ex.tau)
  for k = 1, 4 do
    if math.abs(dec.sim[k] - ex.similarities[k]) > 1e-5 then same = false end
  end
  if dec.name ~= ex.worker or dec.rule ~= ex.rule then same = false end
end
ok(same, "model:route on window signatures repeats the daemon's decisions")

-- a saved snapshot opens offline as the same model
local ms = eldr.load_snapshot(snapfile)
local c1, c2 = ms:centroids(), m:centroids()
local maxd = 0
for i = 1, 4 do
  local a, b = c1:row(i), c2:row(i)
  for j = 1, #a do maxd = math.max(maxd, math.abs(a[j] - b[j])) end
end
ok(maxd < 1e-6 and ms:info().variant == m:info().variant, "load_snapshot gives the served model", maxd)
local okl, msgl = pcall(eldr.load_snapshot, snapfile .. ".nope")
ok(not okl and tostring(msgl):find("eldr.load_snapshot", 1, true), "load_snapshot of a missing file raises", msgl)

-- hungarian against brute force on a 5 x 5
local cost = {}
local seed = 7
for i = 1, 5 do
  cost[i] = {}
  for j = 1, 5 do seed = (seed * 1103515245 + 12345) % 2147483648; cost[i][j] = seed % 97 end
end
local best = math.huge
local function perms(used, i, acc)
  if i > 5 then best = math.min(best, acc); return end
  for j = 1, 5 do
    if not used[j] then used[j] = true; perms(used, i + 1, acc + cost[i][j]); used[j] = false end
  end
end
perms({}, 1, 0)
local asg, total = eldr.hungarian(cost)
local sum, seen = 0, {}
for i = 1, 5 do sum = sum + cost[i][asg[i]]; seen[asg[i]] = true end
ok(math.abs(total - best) < 1e-9 and math.abs(sum - total) < 1e-9 and #asg == 5 and
   seen[1] and seen[2] and seen[3] and seen[4] and seen[5], "hungarian equals brute force", total .. " vs " .. best)

-- refit: fit on the window, align, push -> generation 2, workers keep their names
local refit = require "eldr.refit"
local model, rep = refit.run(r, {min_rows = 64})
ok(rep.pushed and rep.pushed.model_generation == 2 and rep.rows >= 64, "refit pushes a new generation",
   rep.pushed and rep.pushed.model_generation)
local p = {}
for i = 1, 4 do p[rep.perm[i]] = true end
ok(p[1] and p[2] and p[3] and p[4], "refit: the alignment is a permutation")
local s2 = r:snapshot()
ok(s2.model.generation == 2 and s2.workers[1].name == s.workers[1].name, "daemon serves the refit model")
-- the refit carries its own drift baseline: the window's nearest shares
local ns, sum = model:info().nearest_share, 0
for i = 1, #(ns or {}) do sum = sum + ns[i] end
ok(ns and #ns == 4 and math.abs(sum - 1) < 1e-9, "refit: the model stores its window's nearest shares",
   ns and #ns)
ok(s2.drift.baseline_source == "nearest" and s2.drift.window == 0 and s2.drift.share_tvd == nil
   and math.abs(s2.drift.calibration_share[1] - ns[1]) < 1e-8,
   "refit pushed: eldrd's baseline is the refit's own, the window restarts, no NaN",
   s2.drift.baseline_source)
-- aligning a model with itself shuffled recovers the shuffle
local cents = m:centroids()
local shuffled = eldr.matrix({cents:row(3), cents:row(1), cents:row(4), cents:row(2)})
local perm = refit.align(cents, shuffled)
ok(perm[1] == 2 and perm[2] == 4 and perm[3] == 1 and perm[4] == 3, "align undoes a shuffle")

local okd, msgd = pcall(eldr.attach, dead, {timeout = 2})
ok(not okd and tostring(msgd):find(dead, 1, true), "attach to a closed port raises naming the URL", msgd)
ok(not okd and tostring(msgd):find("daemon unreachable", 1, true),
   "attach to a closed port says 'daemon unreachable', as the commands do", msgd)
if n_bad > 0 then os.exit(1) end

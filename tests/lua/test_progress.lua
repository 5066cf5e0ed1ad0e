-- The progress option of the long calls: progress = function(done, total, what).
-- Greedy layer selection reports its steps (0..L of L), eldr.fit its stages
-- (layer selection, signatures, k-means), each ending at done == total; an
-- error inside the function stops the call and comes back out of it.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local full = eldr.load(T.data)
local rows = {}
for i = 1, 120 do rows[i] = i * 3 end
local t = full:select(rows)
local L = t:geometry()

local function recorder()
  local log = {}
  return log, function(done, total, what)
    log[#log + 1] = {done = done, total = total, what = what}
  end
end

-- stages seen in order, and each stage's last report
local function stages(log)
  local order, last = {}, {}
  for _, r in ipairs(log) do
    if not last[r.what] then order[#order + 1] = r.what end
    last[r.what] = r
  end
  return order, last
end

local function monotone(log)
  local prev = {}
  for _, r in ipairs(log) do
    if r.done < (prev[r.what] or 0) or r.done > r.total then return false end
    prev[r.what] = r.done
  end
  return true
end

-- eldr.select_layers
local log, fn = recorder()
local sel = eldr.select_layers(t, {progress = fn})
local order, last = stages(log)
T.eq(order[1], "layer selection", "select_layers: stage name")
T.ok(#log >= 2, "select_layers: reports the start and the end", #log .. " reports")
T.eq(log[1].done, 0, "select_layers: starts at 0")
T.ok(last["layer selection"].done == L and last["layer selection"].total == L,
     "select_layers: ends at L of L")
T.ok(monotone(log), "select_layers: done never goes back")
T.eq(sel.n_star, eldr.select_layers(t).n_star, "select_layers: same result with progress")

-- eldr.rho_curve, eldr.recipe{layers = 'auto'} and eldr.rho{layers = 'auto'} select layers too
for _, c in ipairs({
  {"rho_curve", function(f) return eldr.rho_curve(t, {progress = f}) end},
  {"recipe", function(f) return eldr.recipe(t, {layers = "auto", progress = f}) end},
  {"rho", function(f) return eldr.rho(t, {layers = "auto", progress = f}) end},
}) do
  local lg, f = recorder()
  c[2](f)
  local _, ls = stages(lg)
  T.ok(ls["layer selection"] and ls["layer selection"].done == L,
       c[1] .. ": layer selection reported to the end")
end

-- eldr.fit: every stage, in order, each complete
log, fn = recorder()
local m = eldr.fit(t, {k = 4, progress = fn})
order, last = stages(log)
T.eq(table.concat(order, ","), "layer selection,signatures,k-means", "fit: stages in order")
for _, s in ipairs(order) do
  T.ok(last[s].done == last[s].total, "fit: " .. s .. " ends at done == total")
end
T.eq(last["k-means"].total, 50, "fit: k-means counts rounds of iters (50)")
T.ok(monotone(log), "fit: done never goes back within a stage")
T.eq(m:info().K, 4, "fit: a model with progress")

-- eldr.calibrate.fit (the interruptible pipeline in Lua) reports the same stages
log, fn = recorder()
eldr.calibrate.fit(t, {k = 3, progress = fn})
order, last = stages(log)
T.eq(table.concat(order, ","), "layer selection,signatures,k-means",
     "calibrate.fit: the stages of eldr.fit, in order")
for _, s in ipairs(order) do
  T.ok(last[s].done == last[s].total, "calibrate.fit: " .. s .. " ends at done == total")
end
log, fn = recorder()
eldr.calibrate.mask(t, {progress = fn})
T.ok(#log >= 2 and log[#log].done == L, "calibrate.mask: the greedy steps")

-- bad option, and an error inside the function
T.err(function() eldr.fit(t, {k = 2, progress = 3}) end, "bad argument 'progress'",
      "fit: progress must be a function")
T.err(function() eldr.select_layers(t, {progress = function() error("stop here") end}) end,
      "stop here", "select_layers: an error in progress propagates")
T.err(function() eldr.fit(t, {k = 2, progress = function(d, n, w)
  if w == "k-means" then error("halt in k-means") end end}) end,
      "halt in k-means", "fit: an error in progress propagates")
-- and the state is fine after it
T.eq(eldr.fit(t, {k = 2, layers = "all"}):info().K, 2, "fit works after a failed progress")
T.done()

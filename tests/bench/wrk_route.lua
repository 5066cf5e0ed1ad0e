-- tests/bench/wrk_route.lua - wrk script for tests/bench/wrk_route.sh:
-- route + finish pairs against eldrd. Each connection alternates: a route
-- (POST /v1/route, dense counts from $WRK_BODIES, a fresh request_id), and
-- once its answer is in, a finish (POST /v1/finish) for an id the thread
-- has routed. done() writes TSV rows (what, size, seconds, rate) to
-- $WRK_ROWS: routes/s, p50/p99 latency of all requests, and failures.

dofile(os.getenv("ROOT") .. "/tests/bench/wrk_rows.lua")

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
  thread:set("tid", #threads)
end

function init(args)
  bodies = {}
  for line in io.lines(os.getenv("WRK_BODIES")) do bodies[#bodies + 1] = line end
  seq, pending, npending = 0, {}, 0
  routes, finishes, failures = 0, 0, 0
  headers = {["Content-Type"] = "application/json"}
end

function request()
  if npending > 0 then
    local id = pending[npending]
    pending[npending] = nil
    npending = npending - 1
    return wrk.format("POST", "/v1/finish", headers, '{"request_id":"' .. id .. '"}')
  end
  seq = seq + 1
  -- bodies[i] is the route body's tail: '"counts":"...base64..."}'
  return wrk.format("POST", "/v1/route", headers,
                    '{"request_id":"t' .. tid .. '-' .. seq .. '",' .. bodies[seq % #bodies + 1])
end

function response(status, hdrs, body)
  if status ~= 200 then
    failures = failures + 1
    return
  end
  if body:find('"similarities"', 1, true) then  -- a route answer
    routes = routes + 1
    npending = npending + 1
    pending[npending] = body:match('"request_id":"([^"]+)"')
  else
    finishes = finishes + 1
  end
end

function done(summary, latency, requests)
  wrk_write_rows(summary, latency, "eldrd route+finish", wrk_sum(threads, "routes"), "routes/s",
                 wrk_sum(threads, "failures"))
end

"""The measurements of bench/router_floor.sh (see there): one JSON object on stdout.

  python3 bench/router_floor.py ROUTER_URL NODE_URL ROUTER_PID NODE_PID N
"""
import http.client, json, multiprocessing as mp, os, sys, threading, time
from urllib.parse import urlparse

def hp(u):
    u = urlparse(u); return u.hostname, u.port

def one(url, src="127.0.0.2"):
    h, p = hp(url)
    t0 = time.monotonic()
    c = http.client.HTTPConnection(h, p, timeout=30, source_address=(src, 0))
    c.request("POST", "/", body=b"SELECT 1")
    r = c.getresponse(); r.read(); c.close()
    return (time.monotonic() - t0) * 1000

def normal(url, n, q=None):
    lat = sorted(one(url) for _ in range(n))
    res = dict(p50=round(lat[len(lat)//2],1), p99=round(lat[min(len(lat)-1, int(len(lat)*0.99))],1), max=round(lat[-1],1))
    if q: q.put(res)
    return res

COUNT = mp.Value("i", 0)

def tiny_worker(url, i, stop_at):
    h, p = hp(url)
    c = http.client.HTTPConnection(h, p, timeout=30, source_address=(f"127.0.3.{1+i}", 0))
    n = 0
    while time.monotonic() < stop_at:
        c.request("POST", "/", body=b"SELECT 1"); r = c.getresponse(); r.read(); n += 1
    with COUNT.get_lock():
        COUNT.value += n
    return n

def tiny_threads(url, threads, secs):
    stop = time.monotonic() + secs
    ts = [threading.Thread(target=tiny_worker, args=(url, i, stop)) for i in range(threads)]
    for t in ts: t.start()
    return ts

def tiny_proc(url, threads, secs):
    def run():
        for t in tiny_threads(url, threads, secs): t.join()
    p = mp.Process(target=run); p.start(); return p

def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")

def main():
    R, N, rpid, npid, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    out = {"load": os.getloadavg()}
    out["router_alone"] = normal(R, n)
    out["node_alone"] = normal(N, n)
    # in-process tiny threads (as router_abuse.py does)
    c0 = (cpu(rpid), cpu(npid)); t0 = time.monotonic()
    ts = tiny_threads(R, 8, 15); time.sleep(0.5)
    out["router_tiny_inproc"] = normal(R, n)
    for t in ts: t.join()
    d = time.monotonic() - t0
    out["cpu_inproc"] = dict(router=round((cpu(rpid)-c0[0])/d,2), node=round((cpu(npid)-c0[1])/d,2))
    # tiny in its own process, normal in this one
    COUNT.value = 0
    c0 = (cpu(rpid), cpu(npid)); t0 = time.monotonic()
    p = tiny_proc(R, 8, 15); time.sleep(0.5)
    out["router_tiny_proc"] = normal(R, n)
    p.join(); d = time.monotonic() - t0
    out["cpu_proc"] = dict(router=round((cpu(rpid)-c0[0])/d,2), node=round((cpu(npid)-c0[1])/d,2),
                           requests=COUNT.value,
                           router_ms_per_req=round((cpu(rpid)-c0[0])*1000/max(COUNT.value,1),3),
                           node_ms_per_req=round((cpu(npid)-c0[1])*1000/max(COUNT.value,1),3))
    # tiny through the router in its own process, normal straight to the node
    p = tiny_proc(R, 8, 15); time.sleep(0.5)
    out["node_tiny_proc"] = normal(N, n)
    p.join()
    out["load_end"] = os.getloadavg()
    print(json.dumps(out))

if __name__ == "__main__":
    main()

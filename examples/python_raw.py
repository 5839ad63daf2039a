"""The lock module from redis-py with raw commands (pip install redis).

Start a server first: `make run` (port 7379).
"""
import os
import redis

r = redis.Redis(port=int(os.environ.get("PORT", "7379")))
owner = os.urandom(16).hex()

token = r.execute_command("LOCK.ACQUIRE", "jobs:report", owner, 10_000)
if token is None:
    print("held by someone else")
else:
    print("acquired, fencing token", token)
    try:
        # ... the critical section; pass `token` to whatever you write to ...
        assert r.execute_command("LOCK.EXTEND", "jobs:report", owner, 10_000) == 1
        print("status", r.execute_command("LOCK.STATUS", "jobs:report"))
    finally:
        print("released:", r.execute_command("LOCK.RELEASE", "jobs:report", owner))  # 1

# Wait up to 5 s in the server (FIFO) instead of polling:
token = r.execute_command("LOCK.ACQUIRE", "jobs:report", owner, 10_000, "WAIT", 5_000)
print("waited, token", token)
r.execute_command("LOCK.RELEASE", "jobs:report", owner)

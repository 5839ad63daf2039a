// The lock module from Node with raw commands (npm install ioredis).
// Start a server first: `make run` (port 7379).
import Redis from "ioredis";
import { randomBytes } from "node:crypto";

const redis = new Redis({ port: Number(process.env.PORT ?? 7379) });
const owner = randomBytes(16).toString("hex");

const token = await redis.call("LOCK.ACQUIRE", "jobs:report", owner, 10000);
if (token === null) {
  console.log("held by someone else");
} else {
  console.log("acquired, fencing token", token);
  try {
    // ... the critical section ...
    console.log("status", await redis.call("LOCK.STATUS", "jobs:report"));
  } finally {
    console.log("released:", await redis.call("LOCK.RELEASE", "jobs:report", owner));
  }
}
// Wait up to 5 s in the server (FIFO) instead of polling:
console.log("waited, token", await redis.call("LOCK.ACQUIRE", "jobs:report", owner, 10000, "WAIT", 5000));
await redis.call("LOCK.RELEASE", "jobs:report", owner);
redis.disconnect();

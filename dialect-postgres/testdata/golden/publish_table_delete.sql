-- publish delay=false headers=false
INSERT INTO "jobs" ("payload", "attempt", "created_at") VALUES ($1, $2, $3) RETURNING "id";

-- publish delay=true headers=false
INSERT INTO "jobs" ("payload", "attempt", "created_at", "retry_after") VALUES ($1, $2, $3, $4) RETURNING "id";

-- publish delay=false headers=true
INSERT INTO "jobs" ("payload", "attempt", "created_at", "headers") VALUES ($1, $2, $3, $4) RETURNING "id";

-- publish delay=true headers=true
INSERT INTO "jobs" ("payload", "attempt", "created_at", "retry_after", "headers") VALUES ($1, $2, $3, $4, $5) RETURNING "id";


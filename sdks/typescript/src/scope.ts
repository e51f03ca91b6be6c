/**
 * The seed names a scope's instance by its owner: `userId` for scope `user`, `agentId` for
 * `agent`, `teamId` for `team` (`teamId` alone means scope `team`). Same rules as the Python
 * SDK (memplane/_base.py seed_scope / seed_filter): a contradiction throws before sending.
 */
import { segment } from "./http.js";

export interface ScopeArgs {
  scope?: string;
  scopeRef?: string;
  userId?: string;
  agentId?: string;
  teamId?: string;
}

const OWNERS: Record<string, "userId" | "agentId" | "teamId"> = {
  user: "userId", agent: "agentId", team: "teamId",
};
const SINGLETONS = new Set(["tenant", "institutional"]);

/** `[scope, scopeRef]` from the seed's spelling. */
export function seedScope(args: ScopeArgs): [string, string | undefined] {
  let { scope } = args;
  const { teamId } = args;
  if (scope === undefined) {
    if (teamId === undefined) {
      throw new TypeError("give scope ('user', 'agent', 'team', 'tenant', …), or teamId for " +
        "a team's memory");
    }
    scope = "team";
  }
  if (teamId !== undefined && scope !== "team") {
    throw new TypeError(`teamId names a team's memory: give scope 'team' (or no scope) with ` +
      `it, not scope '${scope}'`);
  }
  const owner = OWNERS[scope];
  const named = owner === undefined ? undefined : args[owner];
  if (owner === undefined || named === undefined) return [scope, args.scopeRef];
  if (args.scopeRef !== undefined && args.scopeRef !== named) {
    throw new TypeError(`scopeRef '${args.scopeRef}' contradicts ${owner} '${named}': the ` +
      `scopeRef of scope '${scope}' is the ${owner}; give one of them, or the same value in both`);
  }
  return [scope, named];
}

/** A listing's `[scope, scopeRef]`: `userId` also filters by data subject. */
export function seedFilter(args: ScopeArgs): [string | undefined, string | undefined] {
  if (args.scope === undefined && args.teamId === undefined && args.agentId === undefined) {
    return [undefined, args.scopeRef];
  }
  const subject = args.scopeRef === undefined ? args.userId : undefined;
  const [scope, scopeRef] = seedScope({ ...args, userId: subject });
  if (args.agentId !== undefined && scope !== "agent") {
    throw new TypeError("pointers are not filtered by agentId: give scope 'agent' with it to " +
      "list that agent's memories");
  }
  return [scope, scopeRef];
}

export function scopePath(scope: string, scopeRef: string | undefined): string {
  let ref = scopeRef;
  if (ref === undefined) {
    if (!SINGLETONS.has(scope)) {
      throw new TypeError(`scopeRef (or the scope's owner: userId, agentId, teamId) is ` +
        `required for scope '${scope}'`);
    }
    ref = "-";
  }
  return `/v1/memories/${segment(scope, "scope")}/${segment(ref, "scopeRef")}`;
}

export function keyPath(args: ScopeArgs & { key: string }): string {
  const [scope, scopeRef] = seedScope(args);
  return `${scopePath(scope, scopeRef)}/${segment(args.key, "key")}`;
}

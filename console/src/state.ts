// Who is signed in (from GET /v1/whoami); the key itself is in api.ts only.
export interface Who {
  tenant_id: string;
  key_id: string;
  role: string;
  agent_id: string | null;
  user_id: string | null;
  scoped: boolean;
  can_create_tenants: boolean;
}

export const session: { who: Who | null } = { who: null };

export const OFFICER_ROLES = ["compliance", "admin"];

// Why a key that is not an officer's cannot sign in, in a sentence.
export function refusal(role: string): string {
  if (role === "agent") {
    return "This is an agent key. The compliance console needs a key with role compliance or admin; " +
      "agent keys read and write memories but cannot export, erase or read the audit log.";
  }
  if (role === "user") {
    return "This is a data subject's own key (role user). The compliance console needs a key with " +
      "role compliance or admin.";
  }
  return `This key has role ${role}. The compliance console needs a key with role compliance or admin.`;
}

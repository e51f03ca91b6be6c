/** `new Memplane({ baseUrl, apiKey })`: every namespace on one transport. */
import {
  AgentsAPI, AuditAPI, JobsAPI, KeysAPI, ReceiptsAPI, StorageAPI, TenantsAPI,
} from "./admin.js";
import { Transport, type ClientOptions } from "./http.js";
import { CompactorAPI, ConversationsAPI, EntriesAPI, EventsAPI } from "./layer.js";
import { MemoryAPI } from "./memory.js";

export class Memplane {
  readonly memory: MemoryAPI;
  readonly storage: StorageAPI;
  readonly agents: AgentsAPI;
  readonly events: EventsAPI;
  readonly entries: EntriesAPI;
  readonly compactor: CompactorAPI;
  readonly conversations: ConversationsAPI;
  readonly jobs: JobsAPI;
  readonly receipts: ReceiptsAPI;
  readonly audit: AuditAPI;
  readonly tenants: TenantsAPI;
  readonly keys: KeysAPI;
  private readonly http: Transport;

  constructor(options: ClientOptions) {
    this.http = new Transport(options);
    this.jobs = new JobsAPI(this.http);
    this.receipts = new ReceiptsAPI(this.http);
    this.memory = new MemoryAPI(this.http, this.jobs, this.receipts);
    this.storage = new StorageAPI(this.http);
    this.agents = new AgentsAPI(this.http);
    this.events = new EventsAPI(this.http);
    this.entries = new EntriesAPI(this.http);
    this.compactor = new CompactorAPI(this.http);
    this.conversations = new ConversationsAPI(this.http);
    this.audit = new AuditAPI(this.http);
    this.tenants = new TenantsAPI(this.http);
    this.keys = new KeysAPI(this.http);
  }

  get baseUrl(): string {
    return this.http.baseUrl;
  }

  /** Whether the server can serve requests (`/readyz`); false when unreachable. */
  async ready(): Promise<boolean> {
    try {
      await this.http.send({ method: "GET", path: "/readyz" }, {});
      return true;
    } catch {
      return false;
    }
  }
}

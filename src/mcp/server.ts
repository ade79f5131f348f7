/**
 * `knowledge mcp`: the agent tools [SURF-3] over MCP stdio, built on the
 * official TypeScript SDK and calling the core service in-process.
 *
 * Composition root of the MCP surface: identity from the command line, the
 * tool table from ./tools.ts, one store opening per tool call.
 *
 * Why the SDK's low-level `Server` and not `McpServer.registerTool`: the
 * latter validates arguments itself and answers a schema violation with a
 * plain-text error that carries no stable code. Here every failure —
 * schema violations and oversized payloads included — is a tool error with
 * `{ error: { code, message } }` (issue 7, "Errors are tool errors carrying
 * the stable codes"), so arguments are parsed with the same zod schemas the
 * tool list publishes.
 *
 * Locking [LAY-4]: the server does NOT hold the store's writer lock while it
 * runs (that would lock the CLI and the Gateway out for a whole agent
 * session). Each write tool opens the store with the lock for that one call
 * and releases it; reads take no lock. A write that finds the lock held
 * waits up to `lockWaitMs` (default 2 s, KNOWLEDGE_MCP_LOCK_WAIT_MS) for a
 * short CLI command or another agent's write to finish, then answers
 * E_LOCKED naming the holder — which is what every write answers while a
 * Gateway owns the store. Reads keep working next to a Gateway.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { resolve } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { isKnowledgeError, KnowledgeError } from '../errors.js';
import { KnowledgeService } from '../service.js';
import type { GitRunnerOptions } from '../git/runner.js';
import { Registry, knowledgeHome } from '../store/registry.js';
import { bindAgentOnLaunch, requireAgentAllowed, type AgentCaller } from './identity.js';
import { TOOLS, type ToolContext, type ToolDefinition } from './tools.js';
import { argumentsError, toolError, toolSuccess, type ToolResult } from './results.js';
import { LineLimit } from './line-limit.js';
import { warningLine } from '../cli/shown.js';
import { MCP_LIMITS } from './schemas.js';

export const SERVER_NAME = 'knowledge';
const SERVER_VERSION = '0.1.0';
const DEFAULT_LOCK_WAIT_MS = 2000;

const INSTRUCTIONS = `Knowledge is your long-term memory: records (pages, claims, relationships) that rest on evidence, with a local Git history of every version.
- Before answering from memory, use knowledge_lookup (exact title, alias or id) or knowledge_grep (words); knowledge_read shows a record with its evidence.
- To store something, use knowledge_remember (one claim + the text it rests on) or knowledge_publish_batch (several records with evidence). Always send a request_id (a fresh UUID) and reuse it when you retry.
- Writes go to this conversation by default (audience "conversation"); use audience "owner-private" for what should outlive the conversation.
- A receipt with git.state "pending" is a success: the write is durable. After the repository problem in git.reason is fixed, knowledge_resume commits it.
- Errors carry a stable code in structuredContent.error.code: E_VALIDATION (fix the arguments), E_CONFLICT (re-read, then revise), E_NOT_FOUND, E_DENIED, E_LOCKED (retry shortly), E_TOO_LARGE, E_READ_ONLY, E_UNAVAILABLE.`;

export interface McpOptions {
  /** The store directory (--store). */
  store: string;
  caller: AgentCaller;
  /** Files under this directory may be attached with knowledge_attach_file (--root, default the working directory). */
  workspaceRoot: string;
  env: NodeJS.ProcessEnv;
  git?: GitRunnerOptions;
  lockWaitMs?: number;
}

export interface McpIo {
  stdin: Readable;
  stdout: Writable;
  stderr: (line: string) => void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * An E_LOCKED for an agent: the holder is named [LAY-4], but where it is
 * another agent's MCP server, not by its agent or session id (a conversation
 * the caller may not know of is never named to it).
 */
function withoutOtherAgents(err: KnowledgeError): KnowledgeError {
  const holder = err.details?.holder as { command?: unknown } | undefined;
  if (typeof holder?.command !== 'string' || !holder.command.startsWith('knowledge mcp (')) return err;
  const command = 'knowledge mcp (another agent\'s write)';
  return new KnowledgeError('E_LOCKED', err.message.split(holder.command).join(command), { ...err.details, holder: { ...holder, command } });
}

/** One store opening per call; writes serialised within this process and waiting briefly for a busy lock. */
function storeAccess(opts: McpOptions, log: (line: string) => void): ToolContext['withService'] {
  const lockWaitMs = opts.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS;
  const command = `knowledge mcp (agent ${opts.caller.agentId}${opts.caller.session ? `, session ${opts.caller.session}` : ''})`;
  // The writer lock is per process: two writes of this process must not overlap.
  let writes: Promise<unknown> = Promise.resolve();
  const open = async (write: boolean): Promise<KnowledgeService> => {
    const deadline = Date.now() + lockWaitMs;
    for (;;) {
      try {
        return KnowledgeService.open(opts.store, { write, command, env: opts.env, git: opts.git });
      } catch (err) {
        if (!(isKnowledgeError(err) && err.code === 'E_LOCKED')) throw err;
        if (Date.now() >= deadline) throw withoutOtherAgents(err);
        await sleep(50);
      }
    }
  };
  return async function withService<T>(mode: 'read' | 'write', fn: (svc: KnowledgeService) => Promise<T> | T): Promise<T> {
    const once = async () => {
      const svc = await open(mode === 'write');
      try {
        return await fn(svc);
      } finally {
        // The work after receipts never changes a tool's answer [GIT-15]: what went wrong in it is logged.
        try {
          for (const note of await svc.settle()) log(`knowledge mcp: ${warningLine(note)}`);
        } catch (err) {
          log(`knowledge mcp: ${warningLine(`after the answer: ${err instanceof Error ? err.message : String(err)}`)}`);
        } finally {
          svc.close();
        }
      }
    };
    if (mode === 'read') return once();
    const run = writes.then(once, once);
    writes = run.catch(() => undefined);
    return run;
  };
}

/** Call one tool: deny foreign and sandboxed callers, parse arguments, run, map the outcome. */
export async function callTool(tool: ToolDefinition, args: unknown, ctx: ToolContext, registry: Registry, storeRoot: string): Promise<ToolResult> {
  try {
    requireAgentAllowed(registry, ctx.caller, storeRoot);
    const parsed = tool.input.safeParse(args ?? {});
    if (!parsed.success) throw argumentsError(tool.name, parsed.error);
    return toolSuccess(await tool.run(ctx, parsed.data));
  } catch (err) {
    return toolError(err);
  }
}

/** The tool list as `tools/list` answers it (also what the schema snapshot test pins). */
export function toolList() {
  return TOOLS.map((t) => ({
    name: t.name,
    title: t.title,
    description: t.description,
    inputSchema: z.toJSONSchema(t.input, { io: 'input', target: 'draft-7' }) as { type: 'object'; [k: string]: unknown },
    annotations: t.annotations,
  }));
}

/** Tool calls being answered: at the end of input, the server closes once they have been (runMcpServer). */
class InFlight {
  private running = 0;
  private readonly waiters: Array<() => void> = [];

  async run<T>(fn: () => Promise<T>): Promise<T> {
    this.running++;
    try {
      return await fn();
    } finally {
      if (--this.running === 0) for (const w of this.waiters.splice(0)) w();
    }
  }

  /** Resolves when no call is running (after the input read so far has reached its handlers). */
  async idle(): Promise<void> {
    await new Promise((tick) => setImmediate(tick));
    if (this.running > 0) await new Promise<void>((done) => this.waiters.push(done));
    // The SDK writes a handler's answer in the promise callbacks after it: let them run before closing.
    await new Promise((tick) => setImmediate(tick));
  }
}

export function buildServer(opts: McpOptions, log: (line: string) => void = () => {}, inFlight = new InFlight()): Server {
  const storeRoot = resolve(opts.store);
  const registry = new Registry(knowledgeHome(opts.env));
  const ctx: ToolContext = { caller: opts.caller, workspaceRoot: resolve(opts.workspaceRoot), withService: storeAccess(opts, log) };
  const byName = new Map(TOOLS.map((t) => [t.name, t]));
  const listed = toolList();
  const server = new Server({ name: SERVER_NAME, version: SERVER_VERSION }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const tool = byName.get(req.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${JSON.stringify(req.params.name)}; the tools are ${[...byName.keys()].join(', ')}`);
    return inFlight.run(() => callTool(tool, req.params.arguments, ctx, registry, storeRoot));
  });
  return server;
}

/**
 * Serve over stdio until the client closes stdin. Fails before serving when
 * the store cannot be opened (E_UNAVAILABLE): a server that could only answer
 * errors is better reported at launch.
 */
export async function runMcpServer(opts: McpOptions, io: McpIo = { stdin: process.stdin, stdout: process.stdout, stderr: (l) => process.stderr.write(l) }): Promise<number> {
  KnowledgeService.open(opts.store, { write: false, env: opts.env, git: opts.git }).close();
  const storeRoot = resolve(opts.store);
  const binding = bindAgentOnLaunch(new Registry(knowledgeHome(opts.env)), opts.caller, storeRoot);
  if (opts.caller.sandboxed) io.stderr(`knowledge mcp: agent ${opts.caller.agentId} is sandboxed: every tool answers E_DENIED\n`);
  else if (binding.kind === 'foreign') {
    io.stderr(`knowledge mcp: agent ${opts.caller.agentId} is registered to ${binding.store}, not ${storeRoot}: every tool answers E_DENIED\n`);
  }

  const inFlight = new InFlight();
  const server = buildServer(opts, io.stderr, inFlight);
  const limited = new LineLimit(MCP_LIMITS.messageBytes, (line) => {
    const id = line.id;
    const message = `E_TOO_LARGE: a request of ${line.bytes} bytes is larger than the limit of ${MCP_LIMITS.messageBytes}; send large originals with knowledge_attach (chunks) or knowledge_attach_file`;
    io.stderr(`knowledge mcp: refused ${message}\n`);
    if (id === undefined) return;
    io.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, error: { code: ErrorCode.InvalidRequest, message, data: { code: 'E_TOO_LARGE' } } }) + '\n');
  });
  io.stdin.pipe(limited);
  const transport = new StdioServerTransport(limited, io.stdout, { maxBufferSize: MCP_LIMITS.messageBytes + 1024 * 1024 });
  const closed = new Promise<void>((resolveClosed) => {
    server.onclose = () => resolveClosed();
  });
  await server.connect(transport);
  // End of input (a client that wrote its requests and closed stdin, as a shell pipe does): the calls already
  // read are answered first; closing at once aborted them, their work done and their answers never written.
  limited.on('end', () => void inFlight.idle().then(() => server.close()));
  await closed;
  return 0;
}

// The agent form's MCP servers: the servers the user may use (`GET /api/system/mcp-servers`) as a pick
// list, and each chosen server's tools (`GET /api/system/mcp-servers/{name}/tools`) as boxes that narrow
// the agent to some of them (`context.mcp_tools`).
import { api } from '../api';
import { t, type Key } from '../i18n';

/** One tool of an MCP server, as discovery found it (`GET /api/system/mcp-servers/{name}/tools`). */
export interface McpTool {
  name: string;
  description: string;
  destructive: boolean;
}

/** One MCP server the user may use (`GET /api/system/mcp-servers`), with its tools once read. */
export interface McpServerOption {
  value: string;
  label: string;
  description?: string;
  status: 'ready' | 'unavailable' | 'unknown';
  tools: McpTool[];
}

/**
 * The MCP servers the user may use, each a checkbox; a chosen server whose tools discovery found shows
 * them too, every one ticked until the user narrows them (`mcp_tools`: the server's only tools). A tool
 * the server marks destructive is flagged: its calls wait for a person's approval.
 */
export function McpPicker(props: {
  servers: McpServerOption[];
  value: string[] | null;
  tools: Record<string, string[]>;
  error?: string;
  toolsError?: string;
  onChange: (mcps: string[], tools: Record<string, string[]>) => void;
}) {
  const chosen = new Set(props.value ?? []);
  // Chosen servers the list does not hold (a server the user cannot see) are kept and shown.
  const servers = [...props.servers];
  for (const v of chosen) if (!servers.some((o) => o.value === v)) servers.push({ value: v, label: v, status: 'unknown', tools: [] });
  const error = props.error ?? props.toolsError;
  const pick = (server: string, on: boolean) => {
    const next = new Set(chosen);
    if (on) next.add(server);
    else next.delete(server);
    const tools = { ...props.tools };
    if (!on) delete tools[server];
    props.onChange(servers.map((o) => o.value).filter((v) => next.has(v)), tools);
  };
  const pickTool = (server: McpServerOption, tool: string, on: boolean) => {
    const all = server.tools.map((x) => x.name);
    const current = new Set(props.tools[server.value] ?? all);
    if (on) current.add(tool);
    else current.delete(tool);
    const tools = { ...props.tools };
    if (all.every((name) => current.has(name))) delete tools[server.value];
    else tools[server.value] = all.filter((name) => current.has(name));
    props.onChange([...chosen], tools);
  };
  return (
    <fieldset
      class={`field checklist mcp-picker${error ? ' has-error' : ''}`}
      data-field="mcps"
      aria-describedby={error ? 'agent-mcps-error' : undefined}
      aria-invalid={error ? 'true' : undefined}
    >
      <legend>{t('form.mcps')}</legend>
      {props.value === null && <p class="hint">{t('form.unsetAll')}</p>}
      {servers.length === 0 && <p class="hint">{t('common.none')}</p>}
      {servers.map((server) => {
        const only = props.tools[server.value];
        return (
          <div class="mcp-server" data-server={server.value}>
            <label class="check" title={server.description}>
              <input type="checkbox" name="agent-mcps" value={server.value} checked={chosen.has(server.value)} onChange={(e) => pick(server.value, e.currentTarget.checked)} />
              {server.label}
              <span class={`badge ${server.status}`}>{t(`form.mcpStatus.${server.status}` as Key)}</span>
            </label>
            {chosen.has(server.value) && server.tools.length > 0 && (
              <fieldset class="plain mcp-tools" data-field="mcp_tools">
                <legend class="hint">{t('form.mcpTools', { server: server.label })}</legend>
                <div class="checks">
                  {server.tools.map((tool) => (
                    <label class="check" title={tool.description}>
                      <input
                        type="checkbox"
                        name={`agent-mcp-tools-${server.value}`}
                        value={tool.name}
                        checked={!only || only.includes(tool.name)}
                        onChange={(e) => pickTool(server, tool.name, e.currentTarget.checked)}
                      />
                      {tool.name}
                      {tool.destructive && <span class="badge warn" title={t('form.mcpDestructiveHint')}>{t('form.mcpDestructive')}</span>}
                    </label>
                  ))}
                </div>
              </fieldset>
            )}
          </div>
        );
      })}
      {error && (
        <p id="agent-mcps-error" class="field-error">
          {error}
        </p>
      )}
    </fieldset>
  );
}

/** The MCP servers the user may use, each with the tools discovery listed; none when they cannot be read. */
export async function loadMcpServers(): Promise<McpServerOption[]> {
  try {
    const listed = await api('GET', '/api/system/mcp-servers');
    return await Promise.all(
      listed.data.map(async (x: any) => {
        const server: McpServerOption = { value: x.slug, label: x.name || x.slug, description: x.description, status: x.status, tools: [] };
        if (x.tool_count > 0) {
          const tools = await api('GET', `/api/system/mcp-servers/${encodeURIComponent(x.slug)}/tools`).catch(() => ({ data: [] }));
          server.tools = tools.data.map((tool: any) => ({ name: tool.name, description: tool.description, destructive: tool.destructive }));
        }
        return server;
      }),
    );
  } catch {
    return [];
  }
}

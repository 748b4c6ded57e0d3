/**
 * A URL in a narrow box: it wraps before its port and at its slashes, not in the middle of the host
 * or the port number as `overflow-wrap: anywhere` alone would (that stays the fallback for a part
 * wider than the box on its own).
 */
export function UrlText({ url }: { url: string }) {
  const parts = /^([a-z][a-z0-9+.-]*:\/\/[^/]*?)(:\d+)?(\/.*)?$/i.exec(url);
  if (parts === null) return <span>{url}</span>;
  const [, schemeAndHost, port = "", path = ""] = parts;
  return (
    <span>
      {schemeAndHost}
      <wbr />
      {port}
      {path
        .split("/")
        .slice(1)
        .map((segment, i) => (
          <span key={i}>
            <wbr />/{segment}
          </span>
        ))}
    </span>
  );
}

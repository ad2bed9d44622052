/**
 * Decodes 64 lowercase hex characters into 32 bytes. Callers check the format first
 * (/^[0-9a-f]{64}$/), so every character is 0-9 or a-f here.
 */
export function hexToBytes(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length >> 1);
  for (let i = 0; i < bytes.length; i++)
    bytes[i] = (nibble(hex.charCodeAt(2 * i)) << 4) | nibble(hex.charCodeAt(2 * i + 1));
  return bytes;
}

/** '0'-'9' (48-57) → 0-9, 'a'-'f' (97-102) → 10-15. */
function nibble(code: number): number {
  return code <= 57 ? code - 48 : code - 87;
}

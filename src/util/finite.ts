/**
 * Whether a value is a finite number: Number.isFinite, which is false for anything but a number,
 * as a type guard (so no separate `typeof` check, which would change nothing, is needed).
 */
export function isFiniteNumber(value: unknown): value is number {
  return Number.isFinite(value);
}

import { ApiError } from "../api/errors.js";

export const connectionNotFound = () => new ApiError(404, "NOT_FOUND", "Connection not found");
export const noAccess = () => new ApiError(403, "FORBIDDEN", "You do not have access to this connection");
export const invalid = (field: string, message: string) =>
  new ApiError(400, "VALIDATION_ERROR", `${field}: ${message}`, { field });
export const placementDenied = (message: string) => new ApiError(403, "FORBIDDEN", message);
